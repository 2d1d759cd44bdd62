// Compiled as part of core's engine folder: the server is above it and must not be seen.
#include "server/server.h"
int layeringProbe() { return 0; }
