// spillway-fixture-hub HUB_DIR [PORT] [BYTES_PER_SECOND]: the test tree's Hub in miniature
// (fixture_hub.h) on 127.0.0.1 until standard input closes; prints its address first. The
// screenshot script points the app's HF_ENDPOINT at it for the Discover scene.

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "fixture_hub.h"

int main(int argc, char** argv)
{
    if (argc < 2) {
        std::fprintf(stderr, "usage: spillway-fixture-hub HUB_DIR [PORT] [BYTES_PER_SECOND]\n");
        return 2;
    }
    spillway::testing_support::FixtureHub hub(argv[1], argc > 2 ? std::atoi(argv[2]) : 0,
                                              argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 0);
    if (!hub.ok()) {
        std::fprintf(stderr, "spillway-fixture-hub: %s\n", hub.error().c_str());
        return 1;
    }
    std::printf("%s\n", hub.url().c_str());
    std::fflush(stdout);
    std::string line;
    while (std::getline(std::cin, line)) {
    }
    return 0;
}
