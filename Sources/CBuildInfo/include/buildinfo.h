#ifndef GLASSES_LOCAL_BUILDINFO_H
#define GLASSES_LOCAL_BUILDINFO_H

/// The commit this binary was built from (`git describe --always --dirty`), or "unknown"
/// for a build that did not name one (Package.swift, GLASSES_LOCAL_COMMIT).
const char *glasses_local_build_commit(void);

#endif
