tandem_add_fuzz(http_request LIBS tandem_http MAX_LEN 8192)
