// The one place a build-time value enters the binary. Package.swift defines
// GLASSES_LOCAL_COMMIT for this file only when the environment of the build names it
// (Scripts/ship does), so a new commit recompiles this file and relinks, nothing else.
#include "buildinfo.h"

#ifndef GLASSES_LOCAL_COMMIT
#define GLASSES_LOCAL_COMMIT "unknown"
#endif

const char *glasses_local_build_commit(void) { return GLASSES_LOCAL_COMMIT; }
