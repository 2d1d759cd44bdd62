// chat-db-crash-helper FOLDER: appends messages to FOLDER/spillway.db forever, the way the app
// does (one commit per message), and writes each message's id to stdout, flushed, right after
// its commit returned. test_chat_db_open kills it with SIGKILL and checks that every id it
// printed is in the database. Every 7th message is edited (a new version) to exercise the
// update path and the FTS triggers as well.

#include <unistd.h>

#include <cstdio>
#include <string>

#include "storage/chat_db.h"

using namespace spillway;
using namespace spillway::storage;

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: chat-db-crash-helper FOLDER\n");
        return 2;
    }
    auto db = ChatDatabase::open(argv[1]);
    if (!db) {
        std::fprintf(stderr, "open: %s\n", db.error().message.c_str());
        return 1;
    }
    auto conversation = db->createConversation("crash test " + std::to_string(::getpid()));
    if (!conversation) {
        std::fprintf(stderr, "conversation: %s\n", conversation.error().message.c_str());
        return 1;
    }
    const std::string filler(200, 'x');
    for (long i = 0;; ++i) {
        const Role role = i % 2 ? Role::Assistant : Role::User;
        auto id = db->appendMessage(*conversation, role,
                                    "message " + std::to_string(i) + " word" +
                                        std::to_string(i % 97) + " " + filler);
        if (!id) {
            std::fprintf(stderr, "append: %s\n", id.error().message.c_str());
            return 1;
        }
        // The id goes out only after the commit returned: the promise under test.
        std::printf("%lld\n", static_cast<long long>(*id));
        std::fflush(stdout);
        if (i % 7 == 6) {
            auto v = db->addVersion(*id, VersionKind::Edit, "edited " + std::to_string(i));
            if (!v) {
                std::fprintf(stderr, "edit: %s\n", v.error().message.c_str());
                return 1;
            }
        }
    }
}
