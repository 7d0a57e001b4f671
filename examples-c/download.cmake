# download: an interrupted download (--stop-after), then the same command resumes it with a range
# request (206, appended) and the file must be exactly the server's body; run again, the server's
# 416 says it is complete (exit 0). A --stop-after reached by the last byte stops nothing. A run
# against the default /bytes, which ignores ranges, rewrites the file from the start (200). The commands run in
# one sh, with the example as "$1" and Python (which writes the expected bytes for cmp) as "$2".
set(rq_download_file "${CMAKE_CURRENT_BINARY_DIR}/download-test.bin")
set(rq_download_url "{base}/bytes?n=300000&rate=100000&ranges=1")
set(rq_download_plain "{base}/bytes?n=200000")
set(rq_download_expected
    "__import__('sys').stdout.buffer.write((b'abcdefghijklmnopqrstuvwxyz0123456789' * 9000)[:int(__import__('sys').argv[1])])")
rq_add_fixture_test(example.download
  COMMAND sh -c "rm -f '${rq_download_file}' \
&& \"$1\" '${rq_download_url}' '${rq_download_file}' --stop-after 100000 \
&& \"$1\" '${rq_download_url}' '${rq_download_file}' \
&& \"$2\" -c \"${rq_download_expected}\" 300000 | cmp - '${rq_download_file}' && echo 'resumed file verified' \
&& \"$1\" '${rq_download_url}' '${rq_download_file}' \
&& rm -f '${rq_download_file}.2' && \"$1\" '{base}/bytes?n=5000' '${rq_download_file}.2' --stop-after 5000 \
&& \"$1\" '${rq_download_plain}' '${rq_download_file}' \
&& \"$2\" -c \"${rq_download_expected}\" 200000 | cmp - '${rq_download_file}' && echo 'rewritten file verified'"
          sh "$<TARGET_FILE:example-download>" "${Python3_EXECUTABLE}"
  EXPECT "^downloading to .*download-test\\.bin: new file$"
         "^stopping after [0-9]+ bytes: run the same command again to resume$"
         "^stopped: what arrived stays in the file$"
         "^kept .*download-test\\.bin: [1-9][0-9]* bytes$"
         "^resuming .*download-test\\.bin from byte [1-9][0-9]*$"
         "^status 206: the server sent the rest, appended$"
         "^metrics: queued [0-9.]+ s, dns [0-9.]+ s, connect [0-9.]+ s, tls -, first byte [0-9.]+ s, total [0-9.]+ s, [1-9][0-9]* bytes down, 0 up, 1 attempt, new connection$"
         "^saved .*download-test\\.bin: 300000 bytes$"
         "^resumed file verified$"
         "^status 416: the file is already complete$"
         "^saved .*download-test\\.bin\\.2: 5000 bytes$"
         "^resuming .*download-test\\.bin from byte 300000$"
         "^status 200: the whole body was written$"
         "^saved .*download-test\\.bin: 200000 bytes$"
         "^rewritten file verified$"
  SERVER_COUNT "^/bytes\\?n=300000&rate=100000&ranges=1$=3" "^/bytes\\?n=200000$=1"
  LABELS example)
