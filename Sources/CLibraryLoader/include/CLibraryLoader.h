#ifndef GLASSES_CLIBRARYLOADER_H
#define GLASSES_CLIBRARYLOADER_H
// The definitions behind CCurl's and CArchive's glasses_* declarations: libcurl and
// libarchive are opened with dlopen the first time one of their functions is called,
// so commands that neither download nor unpack start without loading them.
// Nothing to import from Swift here; this header only names the target.
#endif
