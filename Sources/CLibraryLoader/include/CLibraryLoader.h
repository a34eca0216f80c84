#ifndef GLASSES_CLIBRARYLOADER_H
#define GLASSES_CLIBRARYLOADER_H
// The definitions behind CCurl's, CArchive's, CBZip2's and CSDBus's glasses_* declarations:
// libcurl, libarchive, libbz2 and libsystemd are opened with dlopen the first time one of
// their functions is called, so commands that neither download nor unpack start without
// loading them.
// Nothing to import from Swift here; this header only names the target.
#endif
