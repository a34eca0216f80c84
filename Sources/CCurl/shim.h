#ifndef GLASSES_CCURL_SHIM_H
#define GLASSES_CCURL_SHIM_H
// libcurl's types from its header; its functions through CLibraryLoader, which opens
// libcurl.so.4 on first use (a command that never downloads never loads libcurl and its
// two dozen dependencies). curl_easy_setopt / getinfo / multi_setopt are variadic and
// cannot be called from Swift: one typed wrapper per argument type, no logic.
#include <curl/curl.h>

/// Why libcurl could not be loaded (NULL when it was, or was not tried yet).
const char *glasses_curl_load_error(void);

CURLcode glasses_curl_global_init(long flags);
CURL *glasses_curl_easy_init(void);
void glasses_curl_easy_cleanup(CURL *h);
void glasses_curl_easy_reset(CURL *h);
const char *glasses_curl_easy_strerror(CURLcode code);
struct curl_slist *glasses_curl_slist_append(struct curl_slist *list, const char *s);
void glasses_curl_slist_free_all(struct curl_slist *list);
char *glasses_curl_version(void);
CURLM *glasses_curl_multi_init(void);
CURLMcode glasses_curl_multi_cleanup(CURLM *m);
CURLMcode glasses_curl_multi_add_handle(CURLM *m, CURL *h);
CURLMcode glasses_curl_multi_remove_handle(CURLM *m, CURL *h);
CURLMcode glasses_curl_multi_perform(CURLM *m, int *running);
CURLMcode glasses_curl_multi_poll(CURLM *m, struct curl_waitfd extra[], unsigned int n, int timeout_ms, int *numfds);
CURLMsg *glasses_curl_multi_info_read(CURLM *m, int *queued);
CURLMcode glasses_curl_multi_wakeup(CURLM *m);
CURLcode glasses_curl_easy_pause(CURL *h, int bitmask);
const char *glasses_curl_multi_strerror(CURLMcode code);
CURLSH *glasses_curl_share_init(void);
CURLSHcode glasses_curl_share_cleanup(CURLSH *s);

CURLcode glasses_easy_setopt_long(CURL *h, CURLoption o, long v);
CURLcode glasses_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v);
CURLcode glasses_easy_setopt_ptr(CURL *h, CURLoption o, void *v);
CURLcode glasses_easy_setopt_str(CURL *h, CURLoption o, const char *v);
CURLcode glasses_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v);
CURLcode glasses_easy_setopt_write(CURL *h, CURLoption o, curl_write_callback v);
CURLcode glasses_easy_setopt_xferinfo(CURL *h, CURLoption o, curl_xferinfo_callback v);
CURLcode glasses_easy_getinfo_long(CURL *h, CURLINFO i, long *v);
CURLcode glasses_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v);
CURLcode glasses_easy_getinfo_ptr(CURL *h, CURLINFO i, void **v);
CURLcode glasses_easy_getinfo_str(CURL *h, CURLINFO i, char **v);
CURLMcode glasses_multi_setopt_long(CURLM *m, CURLMoption o, long v);
CURLSHcode glasses_share_setopt_long(CURLSH *s, CURLSHoption o, long v);

#endif
