#ifndef GLASSES_CBZIP2_SHIM_H
#define GLASSES_CBZIP2_SHIM_H
// libbz2's types from its header; its functions through CLibraryLoader, which opens
// libbz2.so.1.0 on first use (only a tar.bz2 install decodes bzip2 itself, block by block
// on several cores; see Unpack/BZip2.swift).
#include <bzlib.h>

/// Why libbz2 could not be loaded (NULL when it was, or was not tried yet).
const char *glasses_bz2_load_error(void);

int glasses_BZ2_bzDecompressInit(bz_stream *strm, int verbosity, int small);
int glasses_BZ2_bzDecompress(bz_stream *strm);
int glasses_BZ2_bzDecompressEnd(bz_stream *strm);

#endif
