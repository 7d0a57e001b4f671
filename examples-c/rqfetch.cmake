# rqfetch: a plain run: files saved, a retried request, an HTTP error, exit status 1.
rq_add_fixture_test(example.rqfetch
  COMMAND example-rqfetch -f -o "${CMAKE_CURRENT_BINARY_DIR}/rqfetch-out" -r 2 --retry-delay 0.1
          "{base}/bytes?n=1000&id=a" "{base}/flaky?key=rqf&fail=1&mode=truncated&n=10" "{base}/status/404"
  EXIT_CODE 1
  EXPECT "^rqfetch: 3 URLs on http://127\\.0\\.0\\.1:[0-9]+, at most 4 at once, FIFO, up to 2 retries after 0\\.1 s, saving into "
         "^ +1  ok +200 +1000 B +[0-9.]+ s  1 try +http://127\\.0\\.0\\.1:[0-9]+/bytes\\?n=1000&id=a -> .*/rqfetch-out/bytes_n=1000_id=a$"
         "^ +2  ok +200 +10 B +[0-9.]+ s  2 tries +http://[^ ]+/flaky\\?key=rqf&fail=1&mode=truncated&n=10 -> .*/rqfetch-out/flaky_key=rqf_fail=1_mode=truncated_n=10$"
         "^ +3  failed +404 +10 B +[0-9.]+ s  1 try +http://[^ ]+/status/404 \\(The server returned a 404 error\\)$"
         "^Total: 3 requests, 2 ok, 1 failed, 0 cancelled, 1 retried. 1020 bytes "
  SERVER_COUNT "^/flaky\\?key=rqf&=2" "^/status/404$=1"
  LABELS example)
