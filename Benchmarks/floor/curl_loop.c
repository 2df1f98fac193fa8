/* The floor of paging over HTTP, for paging-bench row 13: one libcurl easy handle (its
 * connection reused) fetching BASE/repos?page=1..PAGES&per_page=100 into a buffer, nothing
 * parsed. Usage: curl_loop BASE PAGES. Prints the bytes received. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>

static size_t count(char *data, size_t size, size_t n, void *user) {
    (void)data;
    *(size_t *)user += size * n;
    return size * n;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: curl_loop BASE PAGES\n"); return 2; }
    int pages = atoi(argv[2]);
    CURL *curl = curl_easy_init();
    size_t bytes = 0;
    char url[1024];
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, count);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &bytes);
    for (int page = 1; page <= pages; page++) {
        snprintf(url, sizeof url, "%s/repos?page=%d&per_page=100", argv[1], page);
        curl_easy_setopt(curl, CURLOPT_URL, url);
        if (curl_easy_perform(curl) != CURLE_OK) { fprintf(stderr, "page %d failed\n", page); return 1; }
    }
    curl_easy_cleanup(curl);
    printf("%zu\n", bytes);
    return 0;
}
