/*
 * requestqueue.h: the C API of librequestqueue, queues of concurrent asynchronous HTTP requests.
 *
 * This header is the manual. It is written by hand and is the only public interface of the
 * library; every exported symbol starts with `rq_`.
 *
 * Home page: https://github.com/requestqueue/requestqueue
 * Licence: MIT (the LICENSE file).
 * The version (RQ_VERSION_* below) and the home page are written here only: CMake, the .deb, the
 * Python package and the gem read them from this header.
 *
 * ===================================================================================================
 * Overview
 * ===================================================================================================
 *
 * A *request* (`rq_request`) describes one HTTP exchange: URL, method, headers, body, timeouts,
 * callbacks and retry settings. A *queue* (`rq_queue`) runs requests on libcurl, at most
 * `max_concurrent` at a time (default 2, 0 = unlimited), starting waiting requests in FIFO
 * (default) or LIFO order. A request can also run on its own, without a queue
 * (`rq_request_start`). Every request that the library accepts (`rq_add` or `rq_request_start`
 * returned RQ_OK) gets exactly one completion callback: success, failure, cancellation, or
 * cancellation because its queue was freed. No callback of a request runs after its completion.
 *
 *     rq_queue *q;
 *     rq_request *r;
 *     rq_queue_new(RQ_DELIVERY_THREADED, &q);
 *     rq_request_new("http://127.0.0.1:8080/file", &r);
 *     rq_request_set_completion(r, on_done, my_context, NULL);
 *     rq_add(q, r);
 *     rq_request_free(r);            // the queue keeps what it needs
 *     rq_queue_wait_idle(q, -1);     // or do other work
 *     rq_queue_free(q);
 *
 * ===================================================================================================
 * Conventions
 * ===================================================================================================
 *
 * - Results. Every fallible call returns an `rq_result`: RQ_OK (0) on success, or a fixed error
 *   code (values are never renumbered). `rq_result_str` names any code. Out-parameters are written
 *   only when the call returns RQ_OK. `rq_last_error_message` then says what exactly was wrong
 *   (per thread, as errno: see there).
 * - Outcomes. The outcome of a request (success, HTTP status error, timeout, cancelled, ...) is a
 *   separate enum, `rq_outcome`, read from the response in the completion callback; it is never
 *   returned by an API call. `rq_outcome_str` names any outcome.
 * - Handles. `rq_queue *`, `rq_request *` and `rq_auth_challenge *` are opaque handles. The library
 *   checks every handle it is given: a NULL handle gives RQ_ERR_NULL_ARGUMENT, and a handle that was
 *   freed (or was never one of ours) gives RQ_ERR_INVALID_HANDLE, never a crash. Handle values are
 *   not reused within a process (a value could only recur after 2^32 reuses of one internal slot),
 *   so they can serve as keys in a binding's own tables.
 *   `rq_response *` is different: it is a borrowed pointer, valid only during the callback that
 *   received it (or longer with `rq_response_retain`; an `rq_summary_completion_fn` receives its
 *   response retained), and is not checked (NULL is, and gives a neutral value).
 * - Ownership. `_new` creates a handle that the caller owns and releases with `_free`. Freeing
 *   NULL is a harmless no-op returning RQ_OK. Strings and buffers passed in are copied before the
 *   call returns. Strings and buffers handed out (response body, headers, URL, message) are
 *   borrowed: valid only during the callback that received them (or while their response is
 *   retained, see `rq_response_retain`); copy what you keep.
 * - Strings are NUL-terminated. URLs are ASCII (percent-encode the rest; a host name goes in its
 *   IDNA form, "xn--" labels: the library does not convert it). Header values may carry
 *   any byte except NUL, CR and LF.
 * - Times are `double` seconds. Negative, NaN or infinite values are rejected with
 *   RQ_ERR_INVALID_ARGUMENT unless a function says otherwise.
 * - Booleans are `int`: 0 is false, any other value is true.
 * - Security defaults: only http and https URLs are accepted, for requests and for redirects;
 *   TLS certificates and host names are verified (unless RQ_OPTION_UNSAFE_NO_TLS_VERIFY is set,
 *   see "Transport settings"); at most 10 redirects are followed; credentials (set with
 *   `rq_request_set_credentials`, answered to a challenge, or an Authorization header) and a
 *   Cookie header of the request's own are not sent to another host or port after a redirect
 *   (the cookie jar's cookies follow their own domain rules; the request's other headers do
 *   follow). A server cannot send later requests elsewhere: libcurl's Alt-Svc and HSTS engines
 *   are off. As curl does, the proxy environment variables
 *   (`http_proxy`, `https_proxy`, `all_proxy`, `no_proxy`) are honoured unless a request or its
 *   queue sets RQ_OPTION_PROXY.
 * - Transport defaults: bodies are decoded (Accept-Encoding: deflate, gzip, br, zstd), a
 *   User-Agent "librequestqueue/<version> libcurl/<version>" is sent, and HTTP/2 is used over
 *   TLS when the server offers it (with libcurl before 8.1.0, not for a request body over
 *   64 KiB: see HTTP/2 in "What a server sends"); a queue's defaults (`rq_queue_get_defaults`)
 *   change any of these for its requests.
 *
 * ===================================================================================================
 * Threading and callbacks
 * ===================================================================================================
 *
 * - Every function may be called from any thread, concurrently, and from inside any callback of
 *   this library (add, cancel, suspend, resume, change limits, free a request, answer an
 *   authentication challenge). The few calls that would wait for the callback they are called from
 *   return RQ_ERR_WOULD_DEADLOCK instead (see `rq_queue_free`, `rq_queue_wait_idle`,
 *   `rq_queue_dispatch`).
 * - Each queue runs its transfers on an internal thread of its own, its engine thread (named
 *   "rq-engine"; a delivery thread is named "rq-delivery"). While a queue exists, one more thread
 *   for the process, "rq-watch", looks four times a second at the engines that have transfers
 *   running (and sleeps while none has): see HTTP/2 in "What a server sends". How callbacks are
 *   delivered is chosen per queue when it is created:
 *     RQ_DELIVERY_THREADED: callbacks run on the queue's delivery thread (one per queue, started
 *       by `rq_queue_new`): one callback at a time, in the order they were produced.
 *     RQ_DELIVERY_DISPATCH: callbacks wait until the host calls `rq_queue_dispatch` (or
 *       `rq_queue_wait_idle`) and then run on the host's calling thread, one at a time, in order.
 *       `rq_queue_get_fd` gives a file descriptor that is readable while callbacks are ready to
 *       run, for poll/epoll/select, Python's asyncio (`loop.add_reader`) or Ruby's `IO.select`.
 *     RQ_DELIVERY_INLINE: callbacks run on the queue's engine thread itself, inside its loop, one
 *       at a time, in order, as libcurl's multi interface runs its own callbacks: at the points
 *       where the other modes hand a batch over (see "Batching"), and a streamed body's pieces
 *       from inside libcurl's write callback (see `rq_request_set_body_callback`). No thread
 *       hands events to another, so a request added from a completion starts in the same turn of
 *       the loop, with no wake-up. The price: while a callback runs, no transfer of its queue
 *       moves (libcurl reads no socket, and no request starts), and timeouts keep counting: a
 *       callback that blocks or runs long stalls every transfer of its queue and may make them
 *       time out. Callbacks may call any function of this library except those that would wait
 *       for their own queue's engine (`rq_queue_free` and `rq_queue_wait_idle` of their queue:
 *       RQ_ERR_WOULD_DEADLOCK); what they ask of their own queue (adds, cancels, limits,
 *       suspend, resume, answers to challenges) is taken by the engine right after the
 *       callbacks, in the same turn, and calls on other queues behave as from any thread. The
 *       other modes are safer hosts for callbacks that wait (for a lock, a disk, another queue).
 * - Batching: the engine thread hands the events it produces (completions, progress, heads,
 *   body pieces) to the delivery in batches, so that a busy queue does not wake the delivering
 *   thread once per event. A queue with no request waiting to start (its callbacks add the next
 *   ones, say) hands over what each turn of the engine's loop produced at the end of that turn,
 *   so that the requests its callbacks add go out at once. A queue with requests waiting to start
 *   (the engine starts the next one itself as each transfer ends) hands a batch over after 64
 *   events or once its first event is 1 ms old (the engine's waits, counted in whole
 *   milliseconds, end by then), and before the engine goes idle (no transfer running: the queue
 *   suspended, say, or waiting for its rate limit). No event is thus held back more than 2 ms,
 *   and an idle queue delivers at once. (In inline mode nothing is handed over: the engine runs
 *   the callbacks itself after every turn of its loop, as libcurl multi's users run theirs after
 *   each perform.)
 *   The other way round, what callbacks ask of their own queue's engine (requests they add that
 *   can start, transfers they cancel) reaches it in one wake-up of the engine thread at the end of
 *   their batch of callbacks, or at the end of the first callback that returns 1 ms or more after
 *   the call, rather than in one wake-up per call (in inline mode with no wake-up at all). In
 *   threaded and dispatch mode, an engine thread with no transfer running that has just handed a
 *   batch over waits up to 50 microseconds without sleeping (spinning) for what the callbacks
 *   add, so that a request added from a completion callback reaches it without a system call on
 *   either side; when such waits go unanswered it stops spinning for a while (after six in a row,
 *   it spins for one idle wait in 64), so a queue whose callbacks add nothing costs next to no
 *   CPU for it.
 * - A request's callbacks all receive the same `context` pointer, given with
 *   `rq_request_set_completion` (or `rq_request_set_summary_completion`). Its optional `context_free` finalizer is called exactly once, on
 *   the delivering thread, right after the completion callback returns (or by `rq_request_free`
 *   for a request that was never accepted by a queue); after it, no callback uses the context.
 * - Order of events for one request: progress callbacks (if any), then possibly authentication
 *   challenges, then one final progress call per direction, then the completion. The request has
 *   already left the queue when its completion runs: `rq_queue_count` no longer includes it and
 *   the next waiting requests have already been started.
 * - Calls racing on the same handles, from different threads, are resolved as if they ran one
 *   after the other in some order: each returns what it would return in that order. So a request
 *   freed by one thread while another adds it is either accepted (and completes, its finalizer
 *   running after the completion) or refused with RQ_ERR_INVALID_HANDLE (its finalizer already
 *   ran, in `rq_request_free`), never both; of two racing `rq_queue_free` on one queue, one frees
 *   it and returns RQ_OK, the other waits until the queue is freed and returns
 *   RQ_ERR_INVALID_HANDLE; of two racing answers to one challenge, one is taken. (The reliability
 *   suite drives every pair of such calls from two threads under ThreadSanitizer.)
 * - Nothing a caller (other than an RQ_DELIVERY_INLINE callback, which runs on it) or a server
 *   does blocks a queue's engine thread, which runs every transfer and timeout of the queue: it
 *   only opens regular files (see `rq_request_set_output_file` and
 *   `rq_request_set_ca_file`), so that a FIFO without a reader cannot stop it, and it never waits
 *   for a host name resolution to end (a request cancelled or timed out while its name resolves
 *   completes at once; the resolution finishes on its own thread).
 * - Shortages are results, and only while they last. A thread or a descriptor that cannot be had
 *   is RQ_ERR_SYSTEM from `rq_queue_new` and `rq_request_start` (NULL from `rq_queue_default`),
 *   and the next call tries again; a connection that cannot be opened is the request's outcome.
 *   Memory that cannot be had for a large buffer (a response body, a header block, a request
 *   body) is the outcome of the one request that needed it (a message that says "out of
 *   memory"), or RQ_ERR_OUT_OF_MEMORY from `rq_request_set_body`: a buffer that grows past 64 KiB
 *   always leaves 16 MiB of address space to the rest of the process, whose small allocations
 *   would end it if they failed.
 *
 * ===================================================================================================
 * libcurl's global initialisation
 * ===================================================================================================
 *
 * The library calls `curl_global_init(CURL_GLOBAL_ALL)` itself, once per process, when its first
 * queue is made (`rq_queue_new`, `rq_queue_default` or `rq_request_start`; from any thread, the
 * first caller does it and the others wait for it), and never calls `curl_global_cleanup`. If it
 * fails, that call and every later one that makes a queue return RQ_ERR_SYSTEM
 * (`rq_queue_default` NULL). A host that uses libcurl itself may call `curl_global_init` and
 * `curl_global_cleanup` as libcurl allows: libcurl counts the calls, so the host's cleanup never
 * undoes the library's initialisation. Whether those calls may run on another thread while the
 * library makes its first queue depends on the libcurl build: when `curl_version_info` reports
 * CURL_VERSION_THREADSAFE (Debian 12's libcurl 7.88.1 does), `curl_global_init` and
 * `curl_global_cleanup` are thread-safe; without it, call your own `curl_global_init` before any
 * thread makes the first queue (or make the first queue, e.g. `rq_queue_default()`, before
 * starting threads that initialise libcurl). A host must not call `curl_global_cleanup` more
 * often than it called `curl_global_init`.
 *
 * Ending the process: a program may end (exit(), a return from main) without freeing its queues,
 * with requests in flight: the library's threads end with the process (until then, while the exit
 * handlers run, a threaded or inline queue's callbacks may still run). Before libcurl initialises
 * OpenSSL, the library asks OpenSSL not to register its exit handler (OPENSSL_INIT_NO_ATEXIT),
 * which would free OpenSSL's state while an engine thread is in a TLS transfer (a crash at exit).
 * A host that initialised OpenSSL before the first queue (itself, or with its own
 * `curl_global_init`) keeps OpenSSL's handler: it should free its queues (`rq_queue_free`) before
 * it exits when TLS transfers may be in flight.
 *
 * ===================================================================================================
 * Fork
 * ===================================================================================================
 *
 * A child process made by fork() has only the thread that called fork(): the queues it inherits
 * (the default queue and the hidden queue of `rq_request_start` included) have lost their engine
 * and delivery threads. The library registers fork handlers (pthread_atfork, when it makes its
 * first handle) that hold its own locks across fork(), so that the child finds them free, and in
 * the child:
 *  - Every call on an inherited queue returns RQ_ERR_QUEUE_CLOSED (its message says why), except
 *    `rq_queue_free`, which releases it at once, without waiting for threads or callbacks: none
 *    of its callbacks runs in the child, its requests get no completion there, and it returns
 *    RQ_OK (then RQ_ERR_INVALID_HANDLE, as for any freed queue). It closes the child's copy of a
 *    dispatch queue's descriptor; the parent's connections are left alone (their descriptors stay
 *    open in the child until it exits or execs), so the parent's transfers go on undisturbed.
 *  - A request waiting or running in an inherited queue cannot be cancelled or changed: `rq_cancel`,
 *    `rq_request_set_priority` and the answers to its authentication challenges return
 *    RQ_ERR_QUEUE_CLOSED; reading it (`rq_request_get_state`, ...) tells what the parent last knew;
 *    `rq_request_free` releases the child's handle. A request made in the parent and never added
 *    is the child's: it can be changed and added to a queue of the child.
 *  - Responses retained in the parent (`rq_response_retain`) can be read and released in the child.
 *  - New queues work, `rq_queue_default` makes a new default queue (a different handle), and
 *    `rq_request_start` a new hidden queue.
 * A child forked from inside a callback runs on a copy of the thread that ran it (with
 * RQ_DELIVERY_INLINE, the queue's engine thread): it must exec or _exit before the callback
 * returns, as the library's loop it would return to belongs to the parent.
 * So a binding needs no fork handling of its own for the library's objects. What the library
 * cannot vouch for are the locks of other libraries held by other threads at the instant of fork()
 * (POSIX allows only async-signal-safe calls in such a child until it execs); glibc keeps its
 * allocator usable.
 *
 * ===================================================================================================
 * Equality of requests (duplicates)
 * ===================================================================================================
 *
 * Two requests are equal when their method, URL (byte for byte, as given), headers (same names
 * compared case-insensitively, same values byte for byte, in the same order) and body (byte for
 * byte) are equal. Timeouts, callbacks and retry settings do not count. With the default
 * RQ_DUPLICATES_CANCEL_EARLIER, adding a request cancels every earlier equal request still waiting
 * or running in that queue, as `rq_cancel` would (a running one's transfer stops); their completions
 * say RQ_OUTCOME_CANCELLED.
 *
 * ===================================================================================================
 * What a server sends
 * ===================================================================================================
 *
 * The library runs inside its host: no byte a server sends can crash the host, and the memory a
 * server can make it hold is bounded. Every value from the network (status codes, dates, lengths,
 * ranges, header and trailer sizes and counts) is parsed with checked arithmetic and range checks.
 * - A reply that is not HTTP (HTTP/0.9, garbage, a status line that does not start with "HTTP/" in
 *   upper case, or whose code is not three digits from 100 to 599, an "HTTP/2" status line on plain
 *   http without RQ_HTTP_VERSION_2_PRIOR_KNOWLEDGE) ends the attempt with
 *   RQ_OUTCOME_BAD_RESPONSE and status 0. So do, with the
 *   status of the response: invalid chunked framing (a bad chunk size), an invalid Content-Length
 *   (not 1 to 18 digits; a list of equal values, "5, 5", is that value, as RFC 9112 6.3 says),
 *   two different Content-Length values in one response (the end of the
 *   body would be ambiguous: what lies beyond one of them could pass for the next response on
 *   the connection; identical repeats are fine), a NUL byte in a header line (the status line
 *   and chunked trailers included), a header or trailer line without a colon (or with a CR
 *   before it; a bare CR after the colon is part of the value), a header section that starts
 *   with a continuation line, and a 101 Switching Protocols that the request did not ask for
 *   with an Upgrade header of its own (the library speaks only HTTP). None of them is
 *   retried by the default retry outcomes. A body longer than its Content-Length is cut there;
 *   when the extra bytes come with it, its connection is closed rather than used again.
 * - A connection closed or reset before the reply is complete (inside the status line, the
 *   headers, a body of announced length, the chunks or the trailers; or after an informational
 *   1xx response only) ends the attempt with RQ_OUTCOME_CONNECTION_LOST, whatever the delivery
 *   mode and wherever the body goes; a body without length or chunks ends at the close and is
 *   complete (HTTP/1.1). Over TLS, such a body is complete also when the connection ends without
 *   TLS's close_notify alert: libcurl 7.88 does not report the difference (RFC 9112 9.8 asks for
 *   the alert), so whoever can cut the connection on the way can shorten such a body unnoticed.
 *   A body with a Content-Length or chunks, and HTTP/2, are not affected.
 * - Header budget: the status lines, header lines and chunked trailers of all the responses of
 *   one transfer (redirects followed, informational 1xx responses, the final response) may take
 *   256 KiB (262144 bytes) and 10000 lines in all; a transfer over it ends the attempt with
 *   RQ_OUTCOME_BAD_RESPONSE, whose message names the budget. (libcurl limits a single header line
 *   to 100 KiB: the same outcome.) An answered authentication challenge starts a new transfer,
 *   with a new budget.
 * - Transfer codings: the library asks for none (it sends no TE header), so a response with a
 *   Transfer-Encoding other than "chunked" (gzip, deflate, ...) is refused with
 *   RQ_OUTCOME_BAD_RESPONSE rather than decoded. A Content-Encoding (gzip, deflate, br, zstd) is
 *   decoded unless the request opts out (RQ_OPTION_DECODE_CONTENT, see "Transport settings"):
 *   the bytes delivered are the decoded body, and the maximum response size
 *   (`rq_request_set_max_response_size`) and the streaming memory bound count them; `rq_metrics`
 *   reports the bytes that came over the wire apart (`wire_bytes_down`). A coding libcurl does
 *   not know, more than 5 codings stacked, or bytes that do not decode (bytes after the end of
 *   the compressed data included: libcurl 7.88 decodes one gzip member) end the attempt with
 *   RQ_OUTCOME_BAD_RESPONSE. A compressed body cut short is not detected by libcurl 7.88: when its
 *   framing says it is complete (a body that ends at the close of the connection, or a
 *   Content-Length or chunks that hold only part of the compressed data), what decoded is
 *   delivered as a success; the server's framing is all the library checks. A decompression
 *   bomb (a few KiB that decode to gigabytes) costs
 *   bounded memory when the body is streamed or written to a file, but for one case: while a
 *   streamed transfer is paused (see `rq_request_set_body_callback`), libcurl keeps what it
 *   decoded from its last read of the connection, up to 64 MiB; a read that decodes to more (br
 *   and zstd have no bound on their ratio, gzip and deflate stay near 16 MiB) ends the attempt
 *   with RQ_OUTCOME_BAD_RESPONSE, whose message says "decompression bomb". A collected body has
 *   no bound but the maximum response size: set one for servers you do not trust.
 * - The body of a non-2xx answer to a request that streams its body (a body callback or an output
 *   file) is collected in the response up to 1 MiB (1048576 bytes); at that size the attempt ends
 *   (the connection is closed), with the outcome of its status and the message saying the body
 *   was cut.
 * - HTTP/2 (used over TLS when the server offers it, by default: RQ_OPTION_HTTP_VERSION) with
 *   libcurl 7.88 (Debian 12's): a server that keeps sending frames that carry nothing for the
 *   stream (empty DATA frames, PRIORITY, frames of unknown types) makes libcurl read the
 *   connection without returning until a frame brings data for the stream, which holds the
 *   queue's engine thread, and with it every transfer of the queue and the time limits. The
 *   library's "rq-watch" thread ends such a hold: when one turn of an engine has gone on for a
 *   second (1 to 1.5 s) with nothing taken from any response, the TCP connections it read 64 KiB
 *   or more from in its last half second are reset, and their requests end with
 *   RQ_OUTCOME_BAD_RESPONSE, whose message says the engine was held (not retried by the default
 *   retry outcomes). Over a Unix socket (RQ_OPTION_UNIX_SOCKET) the watch cannot tell the
 *   connection, and such a hold lasts as long as the server goes on. One limit remains, which the
 *   library cannot add: a response without Content-Length that the server cuts with an error in
 *   the HTTP/2 framing (a malformed frame, a frame on a stream it must not use) is delivered as
 *   complete, RQ_OUTCOME_OK (libcurl takes the end of the session for the end of the stream; a
 *   connection closed or reset inside it is detected). For servers you do not trust, set
 *   RQ_OPTION_HTTP_VERSION to RQ_HTTP_VERSION_1_1. HTTP/2 frames past nghttp2's limits (more than
 *   8 CONTINUATION frames after a HEADERS frame; control frames whose acknowledgements pile up,
 *   which nghttp2 calls flooding), and header or trailer fields of a response that decode to
 *   more than libcurl's 128 KiB for HTTP/2 (HPACK lets a few bytes stand for a long field), end
 *   the attempt with RQ_OUTCOME_BAD_RESPONSE; so does an HTTP/2 response that nghttp2 finds
 *   malformed (a header name in upper case, a connection-specific field such as Connection or
 *   Transfer-Encoding, a bad :status, a NUL, CR or LF in a value, a Content-Length that its DATA
 *   frames do not match), or whose stream the server resets with PROTOCOL_ERROR,
 *   FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR or COMPRESSION_ERROR. A stream reset with another code
 *   (REFUSED_STREAM, CANCEL, INTERNAL_ERROR, ...) is RQ_OUTCOME_CONNECTION_LOST, and so is a
 *   session that ends before the response is complete (a GOAWAY that leaves the stream out).
 *   Trailers of an HTTP/2 response come after its headers, as chunked trailers do. A server may
 *   answer before it has read the whole request body and then reset the stream with NO_ERROR,
 *   asking the client to stop sending (RFC 9113 8.1; nginx does, for a location that answers
 *   without reading the body): the answer stands. With libcurl 7.88, when that answer and the
 *   reset arrive together, before libcurl has handed the answer over, the attempt ends with
 *   RQ_OUTCOME_CONNECTION_LOST instead, the answer lost. A redirect that libcurl follows (a 307
 *   or 308 to a POST, say), answered before the server has read a request body larger than its
 *   flow-control window, without that reset, left the attempt waiting until its idle timeout
 *   with libcurl 7.88, its engine busy meanwhile: libcurl kept offering the rest of the body on a
 *   stream the server no longer reads (curl's command line waits the same way). So with libcurl
 *   before 8.1.0, a request whose body is over 64 KiB (the usual window: 65,535 bytes, nginx's
 *   64 KiB) goes over HTTP/1.1 unless RQ_OPTION_HTTP_VERSION asks for a version; a server whose
 *   window is smaller can still make a smaller body wait. RQ_HTTP_VERSION_1_1 avoids both.
 * - A proxy's answer to CONNECT (an https request through an HTTP proxy) that goes on for more
 *   than 65536 bytes at once ends the attempt with RQ_OUTCOME_BAD_RESPONSE: libcurl reads it one
 *   byte at a time without returning while bytes keep coming, so a proxy sending an endless 407
 *   body would hold the queue's engine thread, and every transfer of the queue, for as long as it
 *   went on.
 * - A Retry-After that is neither 1 to 9 digits of seconds nor an HTTP-date in one of the three
 *   formats RFC 9110 5.6.7 has recipients accept (an IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT",
 *   years 0001 to 9999; the obsolete "Sunday, 06-Nov-94 08:49:37 GMT", its year at most 50 years
 *   ahead, and "Sun Nov  6 08:49:37 1994") is ignored.
 *
 * ===================================================================================================
 * The HTTP exchange (RFC 9110, 9112)
 * ===================================================================================================
 *
 * What goes out (HTTP/1.1; HTTP/2 over TLS carries the same fields):
 * - The request line has the method as set (case kept) and the URL's path and query exactly as
 *   written (percent-encoding kept; "." and ".." segments removed, as libcurl does); the URL's
 *   fragment ("#...") is never sent. Host is the URL's host, with the port unless it is the
 *   scheme's default ("[::1]:8080" for an IPv6 literal). Userinfo in the URL
 *   ("http://user:pw@host/", percent-decoded) is sent as Basic credentials, as with
 *   `rq_request_set_credentials` (which wins when both are given).
 * - Headers sent by default: Host, User-Agent (RQ_OPTION_USER_AGENT), Accept (the wildcard of any
 *   media type: a star, a slash and a star), Accept-Encoding (with decoding on,
 *   RQ_OPTION_DECODE_CONTENT), and for a body Content-Length. A header set on the request replaces
 *   the default of the same name, once; a header removed (`rq_request_set_header` with NULL) is not
 *   sent at all, defaults included. The request's own headers follow Host, User-Agent, Accept and
 *   Accept-Encoding, in the order they were set.
 * - Bodies: a request that sends a body (one was set, or the method is POST, PUT or PATCH) sends
 *   "Content-Length: <size>" ("0" for none) and no Transfer-Encoding, unless the caller set
 *   "Transfer-Encoding: chunked": the body then goes in chunks, without Content-Length ("chunked"
 *   is the only Transfer-Encoding accepted: the library codes a body in no other way; a request
 *   without a body sends none). A Content-Length set by the caller is ignored: the body's size is
 *   sent, or none when the request has no body (RFC 9110 8.6). No Content-Type is sent unless the
 *   caller sets one. A body of more than 1 MiB is sent with
 *   "Expect: 100-continue" (libcurl's threshold): the body follows the server's "100 Continue", or
 *   after 1 s without an answer; a server that answers a final status instead (413, 401, 417...)
 *   gets no body, that status is the response, and the connection is closed. A 417 (Expectation
 *   Failed) is such a response too: libcurl 7.88 does not repeat the request without the
 *   expectation, as RFC 9110 10.1.1 suggests. Removing the Expect header (NULL) sends the body at
 *   once, for such servers. Requests without a body (GET, HEAD, DELETE, OPTIONS, other methods)
 *   send neither Content-Length nor Transfer-Encoding.
 * - Connections are kept alive and reused by the requests of a queue (`rq_metrics.
 *   connection_reused`), unless the server says "Connection: close" or speaks HTTP/1.0 without
 *   keep-alive. A new https connection resumes a TLS session of an earlier connection of the
 *   queue to that server when the server allows it (made with the same TLS settings). A kept
 *   HTTP/1.x connection on which the server sent anything while it was idle (a response no request
 *   asked for, a body after the head of a HEAD or 204 answer, a 408 before closing) is not used
 *   again: those bytes are no reply to the next request, which goes on a new connection.
 * - Resending: when a kept connection turns out closed by the server before any answer came (the
 *   server timed it out as the request went), libcurl sends the request again on a new connection,
 *   within the same attempt. The library lets it do so only for idempotent methods (GET, HEAD,
 *   OPTIONS, TRACE, PUT, DELETE) and for requests allowed to retry non-idempotent methods
 *   (`rq_request_set_retry_non_idempotent`): a POST, PATCH or other method is never sent twice
 *   unasked, since the server may have acted on it; its attempt ends with
 *   RQ_OUTCOME_CONNECTION_LOST and a message saying it was not sent again (the retry settings then
 *   decide). The same holds over HTTP/2 for a stream the server refused (REFUSED_STREAM, or past a
 *   GOAWAY), although HTTP/2 says such a stream was not processed: the library cannot tell the two
 *   cases apart.
 * What comes back:
 * - Informational 1xx responses (100 Continue, 103 Early Hints, ...) are skipped: the status,
 *   headers and body delivered are those of the final response.
 * - No body is read for HEAD, 204 and 304, whatever their Content-Length says; the response's
 *   Content-Length is the server's (for HEAD, the length a GET would get). A response without
 *   Content-Length or chunked framing (HTTP/1.0 style) ends when the server closes; one that ends
 *   before its Content-Length is RQ_OUTCOME_CONNECTION_LOST. Chunked framing wins over a
 *   Content-Length sent beside it; chunk extensions are ignored.
 * - Any status from 100 to 599 is accepted, by its class: below 400 RQ_OUTCOME_OK, from 400
 *   RQ_OUTCOME_HTTP_STATUS (a 299 is a success, a 499 an error); a reason phrase may be empty or
 *   missing. Outside that range: RQ_OUTCOME_BAD_RESPONSE (see "What a server sends").
 * - Headers (`rq_response_header_count`, `_header_at`, `_header`): those of the final response, in
 *   the order received, names as the server wrote them, repeated fields kept as separate entries
 *   (`rq_response_header` returns the first; walk `rq_response_header_at` for all, e.g. every
 *   Set-Cookie), values without the blanks around them (an empty value is "", not NULL). A line
 *   folded onto the next (obs-fold, RFC 9112 5.2) is joined with one space. Chunked trailers (and
 *   an HTTP/2 response's) come after the headers, as more entries. Only the first line of a response is its status line: a
 *   header or trailer line that starts like one ("HTTP/1.1 500 Oops: x") is a field whose name is
 *   what precedes its colon, as libcurl reads it. No charset conversion is made: the body is the bytes sent,
 *   and the charset is the server's Content-Type header.
 * - Content decoding (RQ_OPTION_DECODE_CONTENT, on by default): the body is decoded (gzip, deflate
 *   with or without its zlib wrapper, br, zstd), but the headers stay the server's:
 *   Content-Encoding is still there, and Content-Length is the encoded size
 *   (`rq_metrics.wire_bytes_down`), not the size of the body delivered (`rq_metrics.bytes_down`). A
 *   Content-Encoding this libcurl does not decode ("compress", "x-custom", ...) ends the attempt
 *   with RQ_OUTCOME_BAD_RESPONSE while decoding is on; with decoding off the body arrives as sent.
 *   "identity" is accepted.
 * - Ranges: a Range header of the caller's is sent as is; a 206 answer is a success whose body is
 *   the part sent (Content-Range tells where it goes); a 416 is an HTTP error.
 * Redirects (followed up to `rq_request_set_max_redirects`, 10 by default):
 * - Location may be absolute, relative ("next", "../x"), or scheme-relative ("//host/path"); it is
 *   resolved against the URL that was redirected (libcurl's `curl_url`). A Location's own fragment
 *   is kept in the effective URL but never sent; without one, the request's fragment carries over
 *   (RFC 9110 10.2.2).
 * - Which statuses: 301, 302, 303, 307 and 308 with a Location are followed, and so are 300, 305
 *   (as any redirect, never as a proxy) and the 3xx statuses HTTP does not define, each
 *   repeating method and body as 307 does (RFC 9110 15.4 allows it; browsers, requests and httpx
 *   follow only the five: set the maximum to 0 to choose yourself). A 304 (Not Modified) answers a
 *   conditional request and is never followed, Location or not: it is the response.
 * - Method and body: 307 and 308 repeat the request as it was (method and body). 301 and 302 turn a
 *   POST into a GET without a body (as browsers, curl, requests and httpx do; RFC 9110 15.4.2-3
 *   allows it for POST only); every other method is repeated with its body. 303 turns a POST into a
 *   GET without a body, and a GET or HEAD stays what it was. A 303 answering a method other than
 *   GET, HEAD and POST is NOT followed (PUT, PATCH, DELETE, OPTIONS, ...): it is the response
 *   (RQ_OUTCOME_OK, status 303, Location in its headers), because libcurl 7.88 would send that same
 *   method to the Location instead of the GET that RFC 9110 15.4.4 asks for; GET the Location
 *   yourself if you want it. Header lines set on the request (Content-Type included) go with every
 *   request of the chain, also after the body was dropped, except credentials to another host.
 * - What the completion tells: the status, headers and body of the last response, and
 *   `rq_response_url`, the last URL fetched. The statuses and headers of the redirects followed are
 *   not kept (`rq_metrics.header_bytes_down` counts their bytes); set the maximum to 0 to see each
 *   one and follow it yourself.
 * - Cookies (RQ_OPTION_COOKIES): libcurl stores at most 50 cookies of one response and none
 *   larger than about 4 KiB; the header budget bounds the Set-Cookie lines of a transfer. Each
 *   queue's jar has a budget, as browsers' have (RFC 6265 6.1 asks for at least 3000 cookies): at
 *   most 3000 cookies and 1 MiB (1,048,576 bytes of the lines `rq_queue_cookies_list` returns).
 *   After an attempt whose responses (redirects included) set cookies that may have taken the jar
 *   over either figure, and after `rq_queue_cookies_load`, the library drops the expired cookies,
 *   then the oldest (those stored first; a cookie set again keeps its age), until the jar holds at
 *   most 2700 cookies and 900 KiB (921,600 bytes). So a server that sets new cookies on every
 *   response evicts older cookies (of any site the queue visits), never grows the jar beyond its
 *   budget, and the newest cookies stay. Ages are tracked to within an eighth of the jar: the jar
 *   is read once the cookies received since it was last read reach an eighth of its size, so the
 *   cost is a pass over the jar per eighth of it received (nothing for responses that set no
 *   cookie). There is no budget per site.
 */
#ifndef REQUESTQUEUE_H
#define REQUESTQUEUE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define RQ_API __attribute__((visibility("default")))
#define RQ_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define RQ_API
#define RQ_DEPRECATED(msg)
#endif

/* ===================================================================================================
 * Version
 * =================================================================================================== */

#define RQ_VERSION_MAJOR 0
#define RQ_VERSION_MINOR 1
#define RQ_VERSION_PATCH 0
/** The version packed as MAJOR * 10000 + MINOR * 100 + PATCH (0.1.0 is 100). */
#define RQ_VERSION_NUMBER (RQ_VERSION_MAJOR * 10000 + RQ_VERSION_MINOR * 100 + RQ_VERSION_PATCH)
#define RQ_VERSION_STRING "0.1.0"

/** The version of the library actually loaded, packed as RQ_VERSION_NUMBER. Compare it with
 *  RQ_VERSION_NUMBER to check that the program runs against the header it was built with. */
RQ_API unsigned rq_version_number(void);

/** The version of the library actually loaded as a static string, such as "0.1.0". */
RQ_API const char *rq_version_string(void);

/* ===================================================================================================
 * Results of API calls
 * =================================================================================================== */

typedef enum rq_result {
    RQ_OK = 0,
    /** A required pointer argument was NULL. */
    RQ_ERR_NULL_ARGUMENT = 1,
    /** The handle was freed, or is not a handle of the expected kind. */
    RQ_ERR_INVALID_HANDLE = 2,
    /** A number or enum value is out of its documented range. */
    RQ_ERR_INVALID_ARGUMENT = 3,
    /** The URL is malformed: not absolute, no host, bad port, spaces or control or non-ASCII
     *  characters, longer than 65536 bytes, or refused by libcurl's URL parser (see
     *  `rq_request_new`). */
    RQ_ERR_INVALID_URL = 4,
    /** The URL's scheme is not http or https. */
    RQ_ERR_UNSUPPORTED_SCHEME = 5,
    /** The method is not an HTTP token (RFC 9110: letters, digits and !#$%&'*+-.^_`|~), or is
     *  empty, or longer than 64 bytes. */
    RQ_ERR_INVALID_METHOD = 6,
    /** A header name is not a token, or a value has CR, LF or NUL, or it is too long (name 256
     *  bytes, value 65536 bytes, 1000 headers). */
    RQ_ERR_INVALID_HEADER = 7,
    /** The request was already added to a queue or started; a request is single-use. */
    RQ_ERR_ALREADY_ADDED = 8,
    /** The request can no longer be changed: it was already added or started. */
    RQ_ERR_REQUEST_FROZEN = 9,
    /** The request is not waiting or running: it was never added, or it has completed. */
    RQ_ERR_NOT_ACTIVE = 10,
    /** The call is not allowed in the object's current state (for example freeing the default
     *  queue, or answering an authentication challenge twice). */
    RQ_ERR_INVALID_STATE = 11,
    /** The call needs the other delivery mode (e.g. `rq_queue_dispatch` on a threaded queue). */
    RQ_ERR_WRONG_DELIVERY = 12,
    /** The queue is being freed and accepts no more requests; or, in a child process, the queue
     *  (or the queue of the request) was inherited across fork() (see "Fork"). */
    RQ_ERR_QUEUE_CLOSED = 13,
    /** A wait ended at its time limit. */
    RQ_ERR_TIMED_OUT = 14,
    /** The call would wait for the callback it is called from. */
    RQ_ERR_WOULD_DEADLOCK = 15,
    /** Memory could not be allocated. */
    RQ_ERR_OUT_OF_MEMORY = 16,
    /** A system resource could not be set up (thread, descriptor, libcurl initialisation). */
    RQ_ERR_SYSTEM = 17
} rq_result;

/** A static, human-readable name for a result code ("invalid URL", ...). Any int is accepted:
 *  unknown values give "unknown result code". Never NULL. */
RQ_API const char *rq_result_str(int result);

/** What exactly was wrong with the most recent call made on the calling thread that returned an
 *  rq_result other than RQ_OK: the function's name, then the reason, such as
 *  `rq_request_new: byte 18 of the URL is a space (0x20): percent-encode it as %20` or
 *  `rq_request_set_header: the value of header "X-A" has a line feed (LF) at byte 3`. Bindings
 *  show it instead of composing their own texts. (`rq_result_str` names the code only.)
 *
 *  - Set: by every function of this header that returns an rq_result other than RQ_OK, before it
 *    returns, on the thread that called it. Nothing else sets it: an outcome of a request is read
 *    from its response (`rq_response_error_message`), never here.
 *  - Cleared: never. A call that returns RQ_OK leaves it as it was (as errno): read it right after
 *    the call that failed, on the same thread. Before the thread's first failed call it is "".
 *  - Valid: the string belongs to the calling thread; it stays valid and unchanged until the next
 *    call on this thread that fails, or until the thread ends. Copy what you keep. Another
 *    thread's calls never change it. Never NULL. */
RQ_API const char *rq_last_error_message(void);

/* ===================================================================================================
 * Outcomes of requests
 * =================================================================================================== */

typedef enum rq_outcome {
    /** The exchange completed with an HTTP status below 400. */
    RQ_OUTCOME_OK = 0,
    /** Cancelled by `rq_cancel`, `rq_queue_cancel_all`, a duplicate added later, an
     *  authentication handler, or because the queue was freed. */
    RQ_OUTCOME_CANCELLED = 1,
    /** The server answered with a status >= 400. Status, headers and body are still delivered;
     *  the message reads "The server returned a <status> error". */
    RQ_OUTCOME_HTTP_STATUS = 2,
    /** A time limit of the request was reached. */
    RQ_OUTCOME_TIMEOUT = 3,
    /** The host name could not be resolved. */
    RQ_OUTCOME_CANNOT_RESOLVE_HOST = 4,
    /** The connection could not be made (refused, unreachable). */
    RQ_OUTCOME_CANNOT_CONNECT = 5,
    /** The connection broke during the exchange (reset, closed early, truncated body, empty
     *  reply). Invalid framing of the reply is RQ_OUTCOME_BAD_RESPONSE instead. */
    RQ_OUTCOME_CONNECTION_LOST = 6,
    /** TLS failed (handshake, certificate verification, ...). */
    RQ_OUTCOME_TLS = 7,
    /** More redirects than allowed (10). */
    RQ_OUTCOME_TOO_MANY_REDIRECTS = 8,
    /** The server's reply was not valid HTTP or broke a rule the library enforces: not HTTP at all
     *  (HTTP/0.9, garbage, a status code outside 100 to 599), invalid chunked framing, an invalid
     *  Content-Length, a transfer coding not asked for, headers and trailers over their budget, a
     *  Content-Range that does not continue a resumed file. See "What a server sends". */
    RQ_OUTCOME_BAD_RESPONSE = 9,
    /** A redirect pointed to a URL or scheme that is not allowed (only redirect problems: a reply
     *  that is not HTTP is RQ_OUTCOME_BAD_RESPONSE). */
    RQ_OUTCOME_BAD_REDIRECT = 10,
    /** Any other transport failure; the message says more. */
    RQ_OUTCOME_TRANSPORT = 11,
    /** The response body exceeded the request's maximum response size. */
    RQ_OUTCOME_RESPONSE_TOO_LARGE = 12,
    /** The output file (`rq_request_set_output_file`) could not be opened or written; the message
     *  names the file and the system's error. */
    RQ_OUTCOME_FILE_ERROR = 13
} rq_outcome;

/** A static name for an outcome ("timed out", ...). Unknown values give "unknown outcome". */
RQ_API const char *rq_outcome_str(int outcome);

/* ===================================================================================================
 * Opaque types and callbacks
 * =================================================================================================== */

typedef struct rq_queue rq_queue;
typedef struct rq_request rq_request;
typedef struct rq_response rq_response;
typedef struct rq_auth_challenge rq_auth_challenge;

/** The completion of a request, called exactly once per accepted request. `request` is valid
 *  during the call (even if the caller already freed its own handle); `response` is borrowed and
 *  valid only during the call. */
typedef void (*rq_completion_fn)(void *context, rq_request *request, const rq_response *response);

/** Upload or download progress. `done` is the number of bytes transferred so far (never
 *  decreasing within one attempt), `total` the expected number or -1 when unknown; `done` never
 *  exceeds a known `total`. `progress` is done / total within [0, 1] when the total is known, and
 *  RQ_PROGRESS_INDETERMINATE (-1.0) when it is not (show a spinner); it is 1.0 only when done ==
 *  total. A final call is made when the request completes: after a success it reports progress
 *  1.0 with total == done; after a cancel it repeats the last figures. A retried request starts
 *  again from 0.
 *  Download figures count body bytes over all the responses of an attempt: the body of a redirect
 *  that is followed, and that of a 401 answered with a credential, are counted, and the next
 *  response's bytes add to them. `total` is the bytes of the earlier responses plus the
 *  Content-Length of the current one (-1 while that is unknown), never less than `done`. Upload
 *  figures: a body sent again within the attempt (a 307 redirect, an answered challenge) keeps
 *  `done` at its highest. */
typedef void (*rq_progress_fn)(void *context, rq_request *request, double progress, int64_t done,
                               int64_t total);

#define RQ_PROGRESS_INDETERMINATE (-1.0)

/** An authentication challenge (the server answered 401). `failure_count` is the number of
 *  earlier answers with a credential that the server rejected for this request (0 the first time;
 *  at most 9: see `rq_auth_use_credential`).
 *  `response` is the 401 response (status, headers such as WWW-Authenticate, body), borrowed for
 *  the call. The handler must answer exactly once, now or later, from any thread, with
 *  `rq_auth_use_credential`, `rq_auth_continue_without` or `rq_auth_cancel`. Until it is answered
 *  the request keeps its place among the running requests. */
typedef void (*rq_auth_fn)(void *context, rq_request *request, rq_auth_challenge *challenge,
                           unsigned failure_count, const rq_response *response);

/** Finalizer of a request's context; see "Threading and callbacks". */
typedef void (*rq_context_free_fn)(void *context);

/* ===================================================================================================
 * Queues
 * =================================================================================================== */

typedef enum rq_delivery {
    /** Callbacks on the queue's delivery thread, one at a time, in order. */
    RQ_DELIVERY_THREADED = 0,
    /** Callbacks on the host's thread inside `rq_queue_dispatch` / `rq_queue_wait_idle`. */
    RQ_DELIVERY_DISPATCH = 1,
    /** Callbacks on the queue's engine thread, inside its loop, one at a time, in order (as
     *  libcurl's multi interface runs its own): no hand-over between threads. A callback that
     *  blocks stalls every transfer of its queue; see "Threading and callbacks". */
    RQ_DELIVERY_INLINE = 2
} rq_delivery;

typedef enum rq_order {
    /** First in, first out: a new request waits behind every waiting request (default). */
    RQ_ORDER_FIFO = 0,
    /** Last in, first out: a new request goes ahead of every waiting request. Running requests
     *  are never interrupted. Changing the order affects only requests added later. */
    RQ_ORDER_LIFO = 1
} rq_order;

typedef enum rq_duplicates {
    /** Adding a request cancels every earlier equal request of the queue (default). */
    RQ_DUPLICATES_CANCEL_EARLIER = 0,
    /** Equal requests are independent and each is sent. */
    RQ_DUPLICATES_ALLOW = 1,
    /** An equal request with a safe method (GET, HEAD, OPTIONS) joins the equal request already
     *  waiting or running and shares its transfer: every one of them gets the same result, in
     *  its own completion (and its own progress calls). Cancelling one of them completes only that
     *  one; the transfer stops when every one of them was cancelled. Other methods are added as
     *  usual. */
    RQ_DUPLICATES_COALESCE = 2
} rq_duplicates;

/** Priority levels: waiting requests of a higher level start first; within a level, the queue's
 *  order (FIFO or LIFO) applies. Running requests are never preempted. */
typedef enum rq_priority {
    RQ_PRIORITY_VERY_LOW = -2,
    RQ_PRIORITY_LOW = -1,
    RQ_PRIORITY_NORMAL = 0,
    RQ_PRIORITY_HIGH = 1,
    RQ_PRIORITY_VERY_HIGH = 2
} rq_priority;

/** Queue-level counters since the queue was created (see `rq_queue_get_stats`). */
typedef struct rq_queue_stats {
    /** Set by the caller to sizeof(rq_queue_stats), so that later versions can add fields. */
    size_t size;
    /** Requests accepted by `rq_add` (coalesced ones included). */
    uint64_t added;
    /** Requests whose first attempt started, and further attempts started by retry. */
    uint64_t started;
    uint64_t retried;
    /** Completions by outcome: RQ_OUTCOME_OK, RQ_OUTCOME_CANCELLED, and every other one. */
    uint64_t succeeded;
    uint64_t cancelled;
    uint64_t failed;
    /** Requests that shared the transfer of an equal one (RQ_DUPLICATES_COALESCE). */
    uint64_t coalesced;
    /** Body bytes received and sent by completed requests. */
    uint64_t bytes_down;
    uint64_t bytes_up;
} rq_queue_stats;

typedef enum rq_request_state {
    /** Created, not yet added or started; may still be changed. */
    RQ_STATE_NEW = 0,
    /** In a queue, waiting for a slot. */
    RQ_STATE_WAITING = 1,
    /** Running: transferring, waiting for a retry delay, or waiting for an authentication answer. */
    RQ_STATE_RUNNING = 2,
    /** Completed (its completion was produced). */
    RQ_STATE_COMPLETED = 3
} rq_request_state;

/** Creates a queue with the given delivery mode, max_concurrent 2, FIFO, duplicates cancelling
 *  earlier ones, not suspended. It owns an engine thread (and in threaded mode a delivery thread,
 *  in dispatch mode a descriptor; an inline queue has neither).
 *  Errors: RQ_ERR_NULL_ARGUMENT, RQ_ERR_INVALID_ARGUMENT (unknown mode), RQ_ERR_SYSTEM (a thread
 *  or a descriptor could not be had: a later call may succeed). */
RQ_API rq_result rq_queue_new(rq_delivery delivery, rq_queue **out_queue);

/** Frees a queue: cancels every waiting and running request, delivers their completions (outcome
 *  RQ_OUTCOME_CANCELLED, message "the queue was freed"), waits for callbacks in flight, and stops
 *  the queue's threads. No callback of this queue runs after it returns. In dispatch mode the
 *  remaining callbacks run on the calling thread, inside this call; in inline mode on the engine
 *  thread, which runs them all before it stops. Pending authentication
 *  challenges become invalid. NULL: no-op, RQ_OK. Several threads may free the same queue at once:
 *  one of them frees it and gets RQ_OK; the others wait until it is freed (their calls too return
 *  only once no callback of the queue can run) and get RQ_ERR_INVALID_HANDLE, as any later call
 *  does. In a child process, a queue inherited across fork() (the default queue included) is
 *  released at once instead (see "Fork"). Errors: RQ_ERR_INVALID_HANDLE, RQ_ERR_INVALID_STATE (the
 *  default queue cannot be freed), RQ_ERR_WOULD_DEADLOCK (called from a callback of this same
 *  queue, or on the thread that runs them, its delivery thread or an inline queue's engine
 *  thread, from inside another queue's callback). */
RQ_API rq_result rq_queue_free(rq_queue *queue);

/** The process-wide default queue (threaded delivery, same defaults as `rq_queue_new`), created
 *  on first use, thread-safe, never freed. Returns NULL only if it cannot be created (no thread
 *  available); a later call tries again, and returns the same queue once it exists. A child process
 *  made by fork() gets a new default queue (see "Fork"). */
RQ_API rq_queue *rq_queue_default(void);

/** Sets the maximum number of requests running at once; 0 means unlimited (values above SSIZE_MAX
 *  count as SSIZE_MAX, which the getter then reports). Takes effect at once:
 *  raising it starts waiting requests immediately; lowering it never interrupts running ones. */
RQ_API rq_result rq_queue_set_max_concurrent(rq_queue *queue, size_t max_concurrent);
/** Writes the queue's maximum number of running requests (0 = unlimited). */
RQ_API rq_result rq_queue_get_max_concurrent(rq_queue *queue, size_t *out_max_concurrent);

/** Sets FIFO or LIFO for requests added from now on. Errors: RQ_ERR_INVALID_ARGUMENT. */
RQ_API rq_result rq_queue_set_order(rq_queue *queue, rq_order order);
/** Writes the order used for requests added from now on. */
RQ_API rq_result rq_queue_get_order(rq_queue *queue, rq_order *out_order);

/** Sets how equal requests are treated (see "Equality of requests"). Applies to later adds. */
RQ_API rq_result rq_queue_set_duplicates(rq_queue *queue, rq_duplicates duplicates);
/** Writes how equal requests are treated. */
RQ_API rq_result rq_queue_get_duplicates(rq_queue *queue, rq_duplicates *out_duplicates);

/** Sets the maximum number of requests running at once to one origin (scheme, host and port, as
 *  written in the URL), besides the queue's limit; 0 means no per-host limit (default; values above
 *  SSIZE_MAX count as SSIZE_MAX). A waiting
 *  request whose host is at its limit keeps its place while requests to other hosts start. */
RQ_API rq_result rq_queue_set_max_per_host(rq_queue *queue, size_t max_per_host);
/** Writes the per-host limit (0 = none). */
RQ_API rq_result rq_queue_get_max_per_host(rq_queue *queue, size_t *out_max_per_host);

/** Limits how often requests start: at most `starts` starts per `interval_seconds` (a token bucket
 *  that holds `starts` tokens and refills continuously), for the whole queue, or for each origin
 *  when `per_host` is non-zero. Retries of a running request do not take tokens. `starts` 0
 *  removes the limit (default). Errors: RQ_ERR_INVALID_ARGUMENT (interval not in (0, 1e6]). */
RQ_API rq_result rq_queue_set_rate_limit(rq_queue *queue, unsigned starts, double interval_seconds,
                                         int per_host);

/** Writes the queue's counters into `*out_stats`; set `out_stats->size` to
 *  sizeof(rq_queue_stats) first (a smaller size gets only the fields that fit; too small for the
 *  first field gives RQ_ERR_INVALID_ARGUMENT). */
RQ_API rq_result rq_queue_get_stats(rq_queue *queue, rq_queue_stats *out_stats);

/** Attaches a pointer of the caller's to the queue (NULL by default; NULL removes it), to find the
 *  host's own object from the queue handle (in a callback: the request's queue, an event loop's
 *  table). The library never reads, frees or calls it. Any thread may set and read it: a
 *  `rq_queue_get_context` racing a set on another thread gets the old pointer or the new one. Errors: RQ_ERR_NULL_ARGUMENT (queue), RQ_ERR_INVALID_HANDLE, RQ_ERR_QUEUE_CLOSED (a
 *  queue inherited across fork(), see "Fork"). */
RQ_API rq_result rq_queue_set_context(rq_queue *queue, void *context);
/** Writes the pointer set with `rq_queue_set_context` (NULL when none was set). Errors:
 *  RQ_ERR_NULL_ARGUMENT (queue or out_context), RQ_ERR_INVALID_HANDLE, RQ_ERR_QUEUE_CLOSED. */
RQ_API rq_result rq_queue_get_context(rq_queue *queue, void **out_context);

/** Suspends the queue: no waiting request starts until `rq_queue_resume`. Running requests go on;
 *  nothing is cancelled. Suspending a suspended queue is a no-op. */
RQ_API rq_result rq_queue_suspend(rq_queue *queue);

/** Resumes the queue and starts waiting requests at once, up to the limit. */
RQ_API rq_result rq_queue_resume(rq_queue *queue);

/** Writes 1 if the queue is suspended, 0 if not. */
RQ_API rq_result rq_queue_is_suspended(rq_queue *queue, int *out_suspended);

/** Writes the number of requests in the queue: running plus waiting. A request leaves the queue
 *  just before its completion callback runs. */
RQ_API rq_result rq_queue_count(rq_queue *queue, size_t *out_count);

/** Takes a snapshot of the queue, consistent at one instant: the running requests in the order
 *  they started, then the waiting ones in the order they will start. Writes a new array (free it
 *  with `rq_snapshot_free`, even when the count is 0) and its length. The handles in it are
 *  borrowed: do not free them; they become invalid (RQ_ERR_INVALID_HANDLE) once the request has
 *  completed and every owner freed it, so using one later is safe but may fail.
 *  Errors: RQ_ERR_NULL_ARGUMENT, RQ_ERR_INVALID_HANDLE, RQ_ERR_OUT_OF_MEMORY. */
RQ_API rq_result rq_queue_snapshot(rq_queue *queue, rq_request ***out_requests, size_t *out_count);

/** Like `rq_queue_snapshot`, for the requests whose tag equals `tag` only. */
RQ_API rq_result rq_queue_snapshot_tag(rq_queue *queue, const char *tag, rq_request ***out_requests,
                                       size_t *out_count);

/** Writes the number of waiting and running requests whose tag equals `tag`. */
RQ_API rq_result rq_queue_count_tag(rq_queue *queue, const char *tag, size_t *out_count);

/** Cancels the waiting and running requests whose tag equals `tag`, as `rq_cancel` does, and
 *  writes how many were cancelled to `out_cancelled` unless it is NULL. */
RQ_API rq_result rq_queue_cancel_tag(rq_queue *queue, const char *tag, size_t *out_cancelled);

/** Frees an array written by `rq_queue_snapshot`. NULL is a no-op. */
RQ_API void rq_snapshot_free(rq_request **requests);

/** Cancels every waiting and running request of the queue; each completion says
 *  RQ_OUTCOME_CANCELLED. The queue itself stays usable. */
RQ_API rq_result rq_queue_cancel_all(rq_queue *queue);

/** Dispatch mode: writes a file descriptor that is readable while callbacks are ready to run (see
 *  "Batching" above: the engine may hold a batch back for at most 2 ms). `rq_queue_dispatch`
 *  makes it unreadable when it returns with no callback left (while it runs callbacks, it may
 *  still read as readable: another thread polling it then finds nothing to dispatch).
 *  It belongs to the queue (do not read, write or close it) and is valid until `rq_queue_free`.
 *  Errors: RQ_ERR_WRONG_DELIVERY for a threaded or inline queue. */
RQ_API rq_result rq_queue_get_fd(rq_queue *queue, int *out_fd);

/** Dispatch mode: runs pending callbacks on the calling thread, at most `max_callbacks` of them
 *  (0 = all that are pending), without waiting. Writes the number run to `out_ran` unless it is
 *  NULL. Calls from several threads are serialized. Errors: RQ_ERR_WRONG_DELIVERY (a threaded or
 *  inline queue), RQ_ERR_WOULD_DEADLOCK (called from one of this queue's callbacks). */
RQ_API rq_result rq_queue_dispatch(rq_queue *queue, size_t max_callbacks, size_t *out_ran);

/** Waits until the queue is idle: no request running or waiting, and every callback delivered.
 *  In dispatch mode the callbacks run on the calling thread while it waits; in threaded and
 *  inline modes the call only waits. `timeout_seconds` < 0
 *  waits without limit. A suspended queue with waiting requests is not idle. Returns RQ_OK once
 *  idle, RQ_ERR_TIMED_OUT at the limit, RQ_ERR_WOULD_DEADLOCK from this queue's own callbacks
 *  (or on the thread that runs them, as for `rq_queue_free`). */
RQ_API rq_result rq_queue_wait_idle(rq_queue *queue, double timeout_seconds);

/** Adds a request to a queue. The queue takes its own reference: the caller may free its handle
 *  at once. The request becomes frozen. It starts at once if the queue is not suspended and has a
 *  free slot. Duplicates are handled per `rq_queue_set_duplicates`.
 *  Errors: RQ_ERR_NULL_ARGUMENT, RQ_ERR_INVALID_HANDLE, RQ_ERR_ALREADY_ADDED (this request was
 *  already added or started: nothing changes), RQ_ERR_QUEUE_CLOSED. A request that another thread
 *  frees during the call is either accepted or refused with RQ_ERR_INVALID_HANDLE (see "Threading
 *  and callbacks"). */
RQ_API rq_result rq_add(rq_queue *queue, rq_request *request);

/** Cancels a waiting or running request (also during a retry delay or while an authentication
 *  challenge waits for its answer). It leaves its queue at once, a running transfer is stopped,
 *  and its completion says RQ_OUTCOME_CANCELLED. Exactly one of several racing cancels returns
 *  RQ_OK; when the request already completed, or was never added, returns RQ_ERR_NOT_ACTIVE. */
RQ_API rq_result rq_cancel(rq_request *request);

/* ===================================================================================================
 * Requests
 * =================================================================================================== */

/** Creates a GET request for `url` (copied). Only http and https URLs are accepted: absolute
 *  ("http://" or "https://", any case, then a host), printable ASCII without spaces, at most 65536
 *  bytes, a port from 1 to 65535. The URL is then parsed by libcurl's own URL parser (`curl_url`,
 *  with the flags libcurl uses for CURLOPT_URL), which must accept it: the scheme, host and port
 *  the library checks and counts (the per-host limit's scheme + host + port) are those of
 *  libcurl's reading, which is what libcurl connects to. So libcurl's
 *  reading decides the ambiguous cases: userinfo ends at the first "@" ("http://a@b@c/" is
 *  refused), a backslash is an ordinary character ("http://h:80\@evil/" goes to host "evil"),
 *  percent-encoded and shortened IPv4 hosts are decoded ("http://%31%32%37.0.0.1/"
 *  and "http://127.1/" are host 127.0.0.1), leading zeros of a port are ignored. Equality of
 *  requests compares the URL as given; `rq_response_url` is the URL as libcurl normalised and
 *  fetched it.
 *  Errors: RQ_ERR_NULL_ARGUMENT, RQ_ERR_INVALID_URL, RQ_ERR_UNSUPPORTED_SCHEME,
 *  RQ_ERR_OUT_OF_MEMORY. */
RQ_API rq_result rq_request_new(const char *url, rq_request **out_request);

/** Releases the caller's handle. A request that was added or started goes on running and
 *  completes as usual (its `request` argument stays valid in its callbacks). For a request never
 *  added or started, its context finalizer is called here. Once this call has begun, the request
 *  can no longer be added or started: an `rq_add` or `rq_request_start` racing it on another
 *  thread either came first (the request runs, and its finalizer runs once, after its completion)
 *  or returns RQ_ERR_INVALID_HANDLE (the finalizer runs once, here). NULL: no-op, RQ_OK.
 *  Errors: RQ_ERR_INVALID_HANDLE (already freed; of two racing frees, one gets RQ_OK). */
RQ_API rq_result rq_request_free(rq_request *request);

/** Sets the method ("GET" by default). Case-sensitive, as HTTP says. "HEAD" fetches no body. Any
 *  token is sent as given ("PROPFIND", "REPORT", ...); see "The HTTP exchange" for bodies,
 *  redirects and resending by method.
 *  Errors: RQ_ERR_INVALID_METHOD, RQ_ERR_REQUEST_FROZEN. */
RQ_API rq_result rq_request_set_method(rq_request *request, const char *method);

/** Sets a header, replacing any header of the same name (compared case-insensitively), and the
 *  default of that name (User-Agent, Accept, Accept-Encoding, Host, Expect, ...). A NULL value
 *  removes it: the header is not sent at all, neither the request's nor a queue default's nor the
 *  library's or libcurl's own (as curl -H "Accept:" does), except Content-Length and
 *  Transfer-Encoding, which the body's framing decides (removing them changes nothing; a
 *  Content-Length set here is ignored, see "Bodies" in "The HTTP exchange"). An empty value sends
 *  the header with no value. Header order is kept. See "The HTTP exchange".
 *  Errors: RQ_ERR_INVALID_HEADER (also a Transfer-Encoding other than "chunked"),
 *  RQ_ERR_REQUEST_FROZEN. */
RQ_API rq_result rq_request_set_header(rq_request *request, const char *name, const char *value);

/** Sets the body (copied). `data` may be NULL only when `size` is 0 (an empty body). A request
 *  with a body and method GET sends it as is; use "POST", "PUT", ... as needed. Methods POST, PUT
 *  and PATCH send a body even when none is set (an empty one). A body goes with
 *  "Content-Length: <size>", no Content-Type unless one is set, and "Expect: 100-continue" above
 *  1 MiB (see "The HTTP exchange"). A large body, or one sent by many requests, goes without a
 *  copy with `rq_request_set_body_borrowed`.
 *  Errors: RQ_ERR_NULL_ARGUMENT, RQ_ERR_OUT_OF_MEMORY, RQ_ERR_REQUEST_FROZEN. */
RQ_API rq_result rq_request_set_body(rq_request *request, const void *data, size_t size);

/** Sets the body without copying it, as `rq_request_set_body` does otherwise (same headers,
 *  methods, Expect and framing). The library reads the `size` bytes at `data` in place whenever it
 *  sends them (each attempt, each redirect or answered challenge that repeats the body), and
 *  never writes or frees them: they must stay valid and unchanged until the request no longer
 *  needs them, that is until its completion callback has returned (its context finalizer, see
 *  `rq_request_set_completion`, runs after that: a place to free them), until `rq_request_free`
 *  for a request never added or started, or until another body set on the request replaces them.
 *  For large bodies: a 10 MiB body set with `rq_request_set_body` costs an allocation and a copy
 *  (and, for fresh memory, a page fault every 4 KiB) per request; borrowed, it costs neither, as
 *  libcurl's CURLOPT_POSTFIELDS. `data` may be NULL only when `size` is 0 (an empty body).
 *  Errors: RQ_ERR_NULL_ARGUMENT, RQ_ERR_INVALID_ARGUMENT (`size` above SIZE_MAX / 2: no buffer
 *  is that large), RQ_ERR_REQUEST_FROZEN. */
RQ_API rq_result rq_request_set_body_borrowed(rq_request *request, const void *data, size_t size);

/** Sets the total time limit of each attempt, from its start (time spent waiting in the queue
 *  does not count); 0 means no limit (default). At most 1e6 s. Errors: RQ_ERR_INVALID_ARGUMENT. */
RQ_API rq_result rq_request_set_timeout(rq_request *request, double seconds);

/** Sets the time limit for connecting (default 30 s; 0 means libcurl's own default). */
RQ_API rq_result rq_request_set_connect_timeout(rq_request *request, double seconds);

/* Slow servers. Besides the connect timeout and the optional total timeout, three limits end an
 * attempt whose server holds it without finishing it, each with RQ_OUTCOME_TIMEOUT (retried like
 * any timeout when retry is on) and a message naming the limit. The engine checks them ten times
 * a second; bytes count in both directions, response headers included. Defaults, and why:
 *  - idle, 60 s: no byte at all for that long (NSURLRequest's timeout; httpx uses 5 s between
 *    reads, aiohttp none by default).
 *  - response headers, the idle timeout (60 s): the headers must be complete that long after the
 *    request was sent (connecting and sending the body do not count; each redirect followed starts
 *    it again). Go's ResponseHeaderTimeout does this job (unset there by default); tying it to the
 *    idle timeout means a server may think as long before answering as it may be silent, and a
 *    server that sends one header line per second, forever, ends after 60 s.
 *  - low speed, 1 byte/s averaged over the idle timeout (60 s): curl's low-speed limit
 *    (CURLOPT_LOW_SPEED_LIMIT/TIME; 1 byte/s is the curl tool's default limit once a speed time is
 *    set), measured by the library over consecutive windows. A server that trickles a byte every
 *    few seconds ends within one to two windows (60 to 120 s); anything that moves at least 60
 *    bytes a minute is never cut, so slow but steady downloads go on. The bytes it counts are
 *    those of the exchange (header lines once complete, bodies, both ways), not the framing
 *    around them: a server that sends an endless chunk extension, which is neither, is slow.
 *    The window is as long as the idle timeout so that no server is cut for pausing sooner than
 *    the idle timeout allows.
 * With the defaults, a queue whose running requests all trickle thus frees its slots within two
 * minutes and starts the requests waiting behind them. Raising or disabling the idle timeout
 * moves the two others with it unless they were set. Streams that are quiet by design (server-sent
 * events with rare heartbeats, long polls) should raise or disable them (0). aiohttp's default
 * total of 300 s is not copied: it cuts large downloads. */

/** Sets the idle limit: the attempt fails with RQ_OUTCOME_TIMEOUT when no byte is received or sent
 *  for this long (default 60 s; 0 disables it). Unless set on their own, the response-header limit
 *  and the low-speed window follow it (see above). */
RQ_API rq_result rq_request_set_idle_timeout(rq_request *request, double seconds);

/** Sets the response-header limit: the attempt fails with RQ_OUTCOME_TIMEOUT when the response
 *  headers are not complete `seconds` after the request was sent (default: the idle timeout, 60 s;
 *  0 disables it; at most 1e6 s). Errors: RQ_ERR_INVALID_ARGUMENT, RQ_ERR_REQUEST_FROZEN. */
RQ_API rq_result rq_request_set_header_timeout(rq_request *request, double seconds);

/** Sets the low-speed limit: the attempt fails with RQ_OUTCOME_TIMEOUT when fewer than
 *  `bytes_per_second` bytes per second, averaged over a window of `seconds`, are received and sent
 *  (default: 1 byte/s over the idle timeout, 60 s). Either value 0 disables it. `bytes_per_second`
 *  at most 1e12, `seconds` at most 1e6. Errors: RQ_ERR_INVALID_ARGUMENT, RQ_ERR_REQUEST_FROZEN. */
RQ_API rq_result rq_request_set_low_speed_limit(rq_request *request, double bytes_per_second,
                                                double seconds);

/** Sets Basic-auth credentials sent with the first attempt (copied). NULL user clears them.
 *  Credentials are not sent to other hosts after a redirect. */
RQ_API rq_result rq_request_set_credentials(rq_request *request, const char *user,
                                            const char *password);

/** Sets the maximum number of redirects followed (default 10; 0 follows none and delivers the 3xx
 *  response itself). More redirects complete with RQ_OUTCOME_TOO_MANY_REDIRECTS. Redirects go only
 *  to http and https URLs. At most 1000. Which method and body each redirect status repeats, and
 *  the 303 answering PUT, DELETE and the like that is delivered rather than followed: see "The
 *  HTTP exchange". */
RQ_API rq_result rq_request_set_max_redirects(rq_request *request, unsigned max_redirects);

/** Sets the maximum size of the response body in bytes; a larger body (announced by Content-Length
 *  or counted while it arrives) ends the attempt with RQ_OUTCOME_RESPONSE_TOO_LARGE. 0 means no
 *  limit (default). The bytes counted are those of the body as delivered, after content decoding
 *  (see "What a server sends"). */
RQ_API rq_result rq_request_set_max_response_size(rq_request *request, uint64_t max_bytes);

/** Sets a file of CA certificates (PEM) to verify the server's TLS certificate with, instead of
 *  the system's (copied path; the file is read when the request runs). TLS certificates and
 *  host names are verified unless RQ_OPTION_UNSAFE_NO_TLS_VERIFY is set (test servers only).
 *  NULL restores the system's CAs. The file is read by the queue's engine thread, which must
 *  never block: when something other than a regular file is at `path` when an attempt starts (a
 *  FIFO, a device, a folder), the attempt ends with RQ_OUTCOME_TLS and a message naming the
 *  file ("not a regular file"), whatever the URL's scheme. */
RQ_API rq_result rq_request_set_ca_file(rq_request *request, const char *path);

/** Sets the completion callback (replacing one set by `rq_request_set_summary_completion`) and
 *  the context given to every callback of this request, with an optional finalizer for the
 *  context. `fn` may be NULL (no completion callback; the finalizer still runs when the request
 *  completes). */
RQ_API rq_result rq_request_set_completion(rq_request *request, rq_completion_fn fn, void *context,
                                           rq_context_free_fn context_free);

/** Sets the upload progress callback (NULL removes it). Only requests with a body report upload
 *  progress. */
RQ_API rq_result rq_request_set_upload_progress(rq_request *request, rq_progress_fn fn);

/** Sets the download progress callback (NULL removes it). */
RQ_API rq_result rq_request_set_download_progress(rq_request *request, rq_progress_fn fn);

/** Sets the authentication challenge handler (NULL removes it). Without a handler, a 401 answer
 *  completes the request with RQ_OUTCOME_HTTP_STATUS (status 401). A Digest challenge that says
 *  stale=true after a credential was answered is answered again by libcurl itself, without the
 *  handler; libcurl counts each such answer as a redirect, so a server that repeats it forever
 *  ends the request with RQ_OUTCOME_TOO_MANY_REDIRECTS (`rq_request_set_max_redirects`). */
RQ_API rq_result rq_request_set_auth_handler(rq_request *request, rq_auth_fn fn);

/** Turns automatic retry on or off (off by default). When on, an attempt that fails with one of
 *  the retry outcomes is started again after the retry delay, from an empty body, while the
 *  request keeps its place among the running requests. HTTP error statuses are not retried unless
 *  RQ_OUTCOME_HTTP_STATUS is among the retry outcomes or the status among the retry statuses.
 *  Methods that are not idempotent (POST, PATCH, ...) are not retried unless allowed with
 *  `rq_request_set_retry_non_idempotent`. Like libcurl and browsers, a request with an
 *  idempotent method sent on a reused keep-alive connection that the server closed before
 *  answering anything is sent once more on a new connection within the same attempt; a POST,
 *  PATCH or other non-idempotent request is not (RQ_OUTCOME_CONNECTION_LOST) unless
 *  `rq_request_set_retry_non_idempotent` allows it (see "The HTTP exchange"). */
RQ_API rq_result rq_request_set_retry(rq_request *request, int enabled);

/** Sets the delay before the first retry (default 5 s; at most 1e6 s). */
RQ_API rq_result rq_request_set_retry_delay(rq_request *request, double seconds);

/** Sets the outcomes that are retried (copied). The default set is RQ_OUTCOME_TIMEOUT,
 *  RQ_OUTCOME_CANNOT_RESOLVE_HOST, RQ_OUTCOME_CANNOT_CONNECT and RQ_OUTCOME_CONNECTION_LOST.
 *  RQ_OUTCOME_OK and RQ_OUTCOME_CANCELLED cannot be retried, and `count` is at most 64
 *  (RQ_ERR_INVALID_ARGUMENT); `outcomes` may be NULL only when `count` is 0 (retry nothing). */
RQ_API rq_result rq_request_set_retry_outcomes(rq_request *request, const rq_outcome *outcomes,
                                               size_t count);

/** Makes the retry delay grow: the n-th retry waits delay * multiplier^(n-1) (multiplier 1, the
 *  default, keeps it fixed; at most 100), capped at `max_delay` seconds (0 = no cap). Then a random
 *  fraction of up to `jitter` (0 to 1; default 0) of the delay is taken off, so that clients do not
 *  retry in step. A server's Retry-After on 429 and 503 is honoured (the delay is at least that);
 *  one above `max_delay` ends the retries. An unusable Retry-After (see "What a server sends") is
 *  ignored. */
RQ_API rq_result rq_request_set_retry_backoff(rq_request *request, double multiplier, double max_delay,
                                              double jitter);

/** Sets HTTP statuses to retry (copied; each 400 to 599, at most 200 of them), such as 429, 502,
 *  503, 504. None by default. */
RQ_API rq_result rq_request_set_retry_statuses(rq_request *request, const int *statuses, size_t count);

/** Allows retries of a method that is not idempotent (POST, PATCH, or any method other than GET,
 *  HEAD, OPTIONS, TRACE, PUT and DELETE), which are never retried otherwise: the server may have
 *  acted on the failed attempt. */
RQ_API rq_result rq_request_set_retry_non_idempotent(rq_request *request, int allow);

/** Sets the maximum number of attempts, the first included; 0 means unlimited (default, as in
 *  the original RequestQueue). At most 1000000. */
RQ_API rq_result rq_request_set_max_attempts(rq_request *request, unsigned max_attempts);

/** Starts the request on its own, without a visible queue (an internal one with no limit, made on
 *  first use). It completes like a queued request, with threaded delivery. Errors:
 *  RQ_ERR_ALREADY_ADDED, RQ_ERR_INVALID_HANDLE (also when freed by another thread meanwhile, see
 *  `rq_request_free`), RQ_ERR_SYSTEM (the internal queue could not be made, no thread being
 *  available: nothing changes, and a later call tries again). */
RQ_API rq_result rq_request_start(rq_request *request);

/** Sets the request's priority (RQ_PRIORITY_NORMAL by default). Unlike other settings it may
 *  change while the request waits: it then moves to its new level (behind the waiting requests of
 *  that level in FIFO order, ahead of them in LIFO order). For a running request it has no effect.
 *  Errors: RQ_ERR_INVALID_ARGUMENT, RQ_ERR_NOT_ACTIVE (completed). */
RQ_API rq_result rq_request_set_priority(rq_request *request, rq_priority priority);
/** Writes the request's priority. */
RQ_API rq_result rq_request_get_priority(rq_request *request, rq_priority *out_priority);

/** Sets a tag (copied byte for byte; NULL removes it) to cancel, count or list requests by
 *  (`rq_queue_cancel_tag`, `rq_queue_count_tag`, `rq_queue_snapshot_tag`). One tag per request. */
RQ_API rq_result rq_request_set_tag(rq_request *request, const char *tag);

/** Writes the request's state (see rq_request_state). */
RQ_API rq_result rq_request_get_state(rq_request *request, rq_request_state *out_state);

/** Writes the context given to `rq_request_set_completion` (NULL if none). */
RQ_API rq_result rq_request_get_context(rq_request *request, void **out_context);

/* ===================================================================================================
 * Responses (borrowed, valid only during the callback that received them, unless retained)
 * =================================================================================================== */

/** Keeps a response, and every string and buffer it hands out, valid after the callback that
 *  received it returns, until a matching `rq_response_release`; returns `response`. Retain and
 *  release may be called from any thread; each retain needs exactly one release. A retained
 *  response may be read from several threads at once. Bindings use this to copy headers and
 *  metrics only when asked. NULL gives NULL. */
RQ_API const rq_response *rq_response_retain(const rq_response *response);

/** Ends one `rq_response_retain`. After the last one, the response and what it handed out are
 *  gone (unless its callback is still running). NULL is a harmless no-op. */
RQ_API void rq_response_release(const rq_response *response);

/** The outcome (RQ_OUTCOME_OK ... ). NULL gives RQ_OUTCOME_TRANSPORT. */
RQ_API rq_outcome rq_response_outcome(const rq_response *response);

/** The HTTP status of the last response received, or 0 when none was received. */
RQ_API int rq_response_status(const rq_response *response);

/** The body bytes of the last response (empty after a failure without response). Writes its
 *  length to `out_size` unless NULL. Never returns NULL for a non-NULL response (an empty body
 *  gives a pointer to a zero-length buffer). */
RQ_API const uint8_t *rq_response_body(const rq_response *response, size_t *out_size);

/** The number of headers of the last response (of the final one after redirects; 1xx responses
 *  and redirects followed are not included; chunked trailers are, after the headers). */
RQ_API size_t rq_response_header_count(const rq_response *response);

/** Writes the name and value of header `index` (0-based, in the order received). Names are as
 *  the server sent them. Errors: RQ_ERR_NULL_ARGUMENT, RQ_ERR_INVALID_ARGUMENT (index). */
RQ_API rq_result rq_response_header_at(const rq_response *response, size_t index,
                                       const char **out_name, const char **out_value);

/** The value of the first header named `name` (case-insensitive), or NULL when absent ("" for a
 *  header sent with an empty value). Repeated headers: see `rq_response_header_at`. */
RQ_API const char *rq_response_header(const rq_response *response, const char *name);

/** The effective URL: the last one fetched, after redirects (with a fragment, see "The HTTP
 *  exchange"). Without a redirect it is the request's URL as libcurl normalised it, userinfo
 *  (password included) and fragment kept: mind it before logging it. Never NULL for a non-NULL
 *  response. */
RQ_API const char *rq_response_url(const rq_response *response);

/** A message describing a failure ("" for RQ_OUTCOME_OK). Never NULL for a non-NULL response. */
RQ_API const char *rq_response_error_message(const rq_response *response);

/** The number of attempts made (1 without retries; 0 when cancelled before starting). A request
 *  cancelled while it waits for its retry delay counts only the attempts that started. */
RQ_API unsigned rq_response_attempts(const rq_response *response);

/** The figures of a response that a completion reads first, read in one call by
 *  `rq_response_get_summary`: each field is what its own function returns. */
typedef struct rq_response_summary {
    /** Set by the caller to sizeof(rq_response_summary), so that later versions can add fields.
     *  On return, the number of bytes written. */
    size_t size;
    /** `rq_response_outcome`. */
    rq_outcome outcome;
    /** `rq_response_status`: the HTTP status of the last response, 0 when none was received. */
    int status;
    /** `rq_response_http_version`: 10, 11, 20 or 30; 0 when no status line was received. */
    int http_version;
    /** `rq_response_attempts`. */
    unsigned attempts;
    /** `rq_response_body`: the body bytes (borrowed as the response's other buffers are; never
     *  NULL) and their count. */
    const uint8_t *body;
    size_t body_size;
} rq_response_summary;

/** Writes the outcome, status, HTTP version, attempts and body of `response` into `*out_summary`,
 *  one call instead of five: for bindings, where each call into the library has a cost of its own
 *  (Python's cffi, Ruby's ffi). Set `out_summary->size` to sizeof(rq_response_summary) first: a
 *  smaller size gets only the fields that fit; a size too small for the first field gives
 *  RQ_ERR_INVALID_ARGUMENT. Errors: RQ_ERR_NULL_ARGUMENT (`response` or `out_summary` NULL),
 *  RQ_ERR_INVALID_ARGUMENT. */
RQ_API rq_result rq_response_get_summary(const rq_response *response, rq_response_summary *out_summary);

/* ===================================================================================================
 * Authentication challenges
 * =================================================================================================== */

/** Answers a challenge by sending the request again with these credentials (copied; Basic or
 *  Digest, as the server asks). The challenge handle is invalid afterwards. If the server rejects
 *  them, the handler is called again with failure_count one higher, up to 9: the tenth rejected
 *  credential completes the request with that 401 (RQ_OUTCOME_HTTP_STATUS), as without a handler
 *  (each answer goes out at once, so a handler that always answers would otherwise send requests
 *  for ever to a server that rejects them). Each answer starts a new exchange, whose time limits
 *  (`rq_request_set_timeout` included) start again.
 *  Errors: RQ_ERR_NULL_ARGUMENT, RQ_ERR_INVALID_HANDLE (already answered, or the request completed
 *  or was cancelled in the meantime). */
RQ_API rq_result rq_auth_use_credential(rq_auth_challenge *challenge, const char *user,
                                        const char *password);

/** Answers a challenge by continuing without a credential: the request completes with the 401
 *  response (RQ_OUTCOME_HTTP_STATUS). */
RQ_API rq_result rq_auth_continue_without(rq_auth_challenge *challenge);

/** Answers a challenge by cancelling the request (RQ_OUTCOME_CANCELLED). */
RQ_API rq_result rq_auth_cancel(rq_auth_challenge *challenge);

/* ===================================================================================================
 * Streaming
 * =================================================================================================== */

/** Receives the body of a response piece by piece (see `rq_request_set_body_callback`). `data`
 *  holds `size` bytes (never 0), borrowed for the call. `offset` is the position of `data[0]` in
 *  the body of the current attempt: it is 0 for the first piece of a body, and 0 again when a
 *  retried attempt starts the body over. Return 0 to go on; any other value cancels the request:
 *  no further piece is delivered and the completion says RQ_OUTCOME_CANCELLED. */
typedef int (*rq_data_fn)(void *context, rq_request *request, const uint8_t *data, size_t size,
                          uint64_t offset);

/** Delivers the body to `fn` as it arrives instead of collecting it (NULL removes the callback),
 *  so that memory stays bounded whatever the size of the body.
 *
 *  - What is streamed: the body of a final response with a 2xx status. The body of any other
 *    response (an HTTP error, a 3xx when redirects are not followed, a 401 handed to the
 *    authentication handler) is collected and delivered in the response as usual. After a
 *    success, the completion's body is empty.
 *  - Delivery: like progress callbacks, with the request's context, on the queue's delivery thread
 *    (RQ_DELIVERY_THREADED), inside `rq_queue_dispatch` (RQ_DELIVERY_DISPATCH) or on the engine
 *    thread (RQ_DELIVERY_INLINE), in order, all of them before the completion.
 *  - Pieces, RQ_DELIVERY_INLINE: the callback runs inside libcurl's write callback and `data` is
 *    libcurl's own buffer (no copy), valid for the call only: libcurl passes at most 16 KiB at a
 *    time, from reads of up to 256 KiB (16 KiB with content decoding on, the default, see
 *    RQ_OPTION_DECODE_CONTENT; a compressed body's pieces are its decoder's output). The events
 *    produced before a piece (the head of its response, progress, other requests' callbacks) run
 *    before it.
 *    libcurl reads on only once the callback returned: a slow callback slows the download by
 *    itself (and every transfer of the queue), with no buffer in between; the 1 MiB bound and the
 *    pause below do not apply.
 *  - Pieces, the other modes: the library copies what libcurl passes (at most 16 KiB at a time,
 *    valid only inside libcurl's callback on the queue's engine thread) once, into a buffer of
 *    its own, and gathers into one piece what arrived during one turn of its loop (libcurl reads
 *    while the connection has data: 256 KiB at a time, 16 KiB with content decoding on): up to
 *    256 KiB. A piece is delivered as soon as that turn ends: it never waits for more data to
 *    arrive. (libcurl's buffer cannot be handed out instead: libcurl 7.88 reads the next data
 *    into the same buffer as soon as its callback returns, the engine thread must never wait for
 *    a callback that runs on another thread, and a paused transfer has libcurl copy the data it
 *    holds anyway.)
 *  - Bounded memory (threaded and dispatch modes): the pieces of a body are parts of 256 KiB
 *    buffers (each piece is the data that arrived during one turn, placed in the buffer after
 *    the piece before it; a buffer is freed for reuse once its last piece was delivered). While
 *    about 1 MiB of such buffers (4) holds data waiting for delivery, the transfer is paused
 *    (libcurl stops reading the connection and TCP slows the server down) and it resumes once
 *    the callbacks have caught up. A slow callback, or a dispatch-mode host that dispatches
 *    slowly, thus slows the download instead of filling memory. The buffers are reused from one
 *    streamed body to the next: a queue keeps at most 6 free ones (1.5 MiB) per transfer
 *    streaming at the time (6 while none streams, so that a body added from the completion of
 *    the one before reuses them), and frees them all once none of its transfers has streamed for
 *    a second, and when the queue is freed. With content decoding, a paused transfer also holds
 *    what libcurl decoded from its last read (see "What a server sends": a decompression bomb).
 *    Time spent paused does not count toward the idle timeout
 *    (`rq_request_set_idle_timeout`); it does count toward the total timeout
 *    (`rq_request_set_timeout`).
 *  - Retries: pieces of a failed attempt have been delivered; the next attempt starts the body
 *    over, from offset 0. The size of the final body is `bytes_down` in `rq_response_metrics`.
 *  - Cancellation: after `rq_cancel`, pieces received before the cancel may still be delivered,
 *    before the completion. The maximum response size applies to the streamed bytes as well.
 *  - A request that streams its body never shares the transfer of another one
 *    (RQ_DUPLICATES_COALESCE adds it as an independent request).
 *  Errors: RQ_ERR_INVALID_STATE (an output file is set: a body goes to one place),
 *  RQ_ERR_REQUEST_FROZEN. */
RQ_API rq_result rq_request_set_body_callback(rq_request *request, rq_data_fn fn);
/* (The collected body of a non-2xx response to a streaming request is kept to 1 MiB: see "What a
 * server sends".) */

/** The head of a response: `head` has the status, headers and effective URL of the response, as
 *  `rq_response_status`, `rq_response_header*` and `rq_response_url` read them, its HTTP version
 *  (`rq_response_http_version`), and an empty body (its outcome is RQ_OUTCOME_OK, or
 *  RQ_OUTCOME_HTTP_STATUS for a status of 400 or more, as the completion would say; its other
 *  metrics are all "does not apply"). It is borrowed for the call;
 *  `rq_response_retain` keeps it, as it does a completion's response. */
typedef void (*rq_head_fn)(void *context, rq_request *request, const rq_response *head);

/** Calls `fn` (NULL removes it) with the head of the final response of each attempt, as soon as
 *  its headers have arrived: the status and headers can be used before the body ends (a large or
 *  endless streamed body, a server that holds the body back). Works with or without a body
 *  callback or output file.
 *
 *  - Which responses: the one that ends the attempt's exchange with the server. Not a 1xx
 *    response, not a redirect that is followed (a 3xx with a Location when redirects are on and
 *    their maximum is not reached; such a redirect that then fails gives no head either), not a
 *    401 answered by libcurl with the request's credentials or by the authentication handler with
 *    a credential. Any other status gives a head: a 2xx, a 3xx not followed, a 404, a 503 about to
 *    be retried. A 401 gives its head only once the attempt ended (its body has arrived) and
 *    nothing answered it: the handler's `rq_auth_continue_without`, no handler, a retry. An
 *    attempt that ends before the headers of such a response were complete (connection refused, a
 *    timeout, a reply that is not HTTP) gives no head.
 *  - Order: on the same thread as the other callbacks (the queue's delivery thread, inside
 *    `rq_queue_dispatch`, or the engine thread), each attempt's head before that attempt's body
 *    pieces (`rq_request_set_body_callback`), and everything before the completion. Body pieces
 *    follow only for a 2xx: the body of any other status is collected into the completion's
 *    response as usual (kept to 1 MiB for a streaming request: see "What a server sends"), so
 *    after a non-2xx head the next call is the completion (or, when that attempt is retried, the
 *    next attempt's head).
 *  - Retries: each attempt that received a final response gives its own head, then its pieces from
 *    offset 0. A request thus sees head, pieces, head, pieces, ..., completion.
 *  - Cancellation: after `rq_cancel` (or a body callback that returns non-zero), a head received
 *    before the cancel may still be delivered, before the completion; none comes after it.
 *  - RQ_DUPLICATES_COALESCE: each request sharing a transfer that has a head callback gets the
 *    head, with its own context. A request with a head callback shares only the transfer of a
 *    request that has not started yet (otherwise it is added as an independent request), so that
 *    it never misses the head.
 *  Errors: RQ_ERR_REQUEST_FROZEN. */
RQ_API rq_result rq_request_set_head_callback(rq_request *request, rq_head_fn fn);

/** Writes the body into the file at `path` (copied; a relative path is taken from the working
 *  directory when the request runs) instead of collecting it. The queue's engine thread writes
 *  each piece as it arrives, so memory stays bounded whatever the size. NULL removes the setting.
 *
 *  - The file is opened when the headers of a final response with a 2xx status have arrived: it is
 *    created (mode 0644, less the umask) or truncated, then written. Only a regular file is used
 *    (the engine thread that writes it must never block): a FIFO (with or without a reader), a
 *    socket, a device (/dev/null included) or a folder at `path` ends the attempt with
 *    RQ_OUTCOME_FILE_ERROR, "cannot open <path>: not a regular file", and is left untouched. A response with another status
 *    leaves the file as it was (not even created); its body is delivered in the response as usual.
 *    After a success the completion's body is empty. The library does not fsync the file. (A 206
 *    answering a Range header set on the request, without resuming, is written like a 200.)
 *  - With `resume` non-zero, an attempt that finds a regular file of S > 0 bytes at `path` sends
 *    `Range: bytes=S-` (in place of any Range header of the request). A 206 answer whose
 *    Content-Range starts at S is appended to the file; a 200 answer (a server that ignores
 *    ranges) rewrites the file from the start; a 206 starting elsewhere ends the attempt with
 *    RQ_OUTCOME_BAD_RESPONSE and leaves the file as it was. A 416 answer (usually: the file is
 *    already complete) is an HTTP error, RQ_OUTCOME_HTTP_STATUS, and leaves the file as it was. No
 *    validator (If-Range) is sent: resume only files of a resource that does not change.
 *  - A failed attempt leaves what it wrote in place, so that it can be resumed later. With retry
 *    on, the next attempt rewrites the file, or with `resume` continues from its size at that time.
 *  - Progress callbacks and `bytes_down` in `rq_response_metrics` count the bytes of the current
 *    transfer, not those already in the file.
 *  - The file cannot be opened or written (no such folder, permissions, disk full, ...): the
 *    attempt ends with RQ_OUTCOME_FILE_ERROR, whose message names the file and the system error.
 *  - A request with an output file never shares the transfer of another one
 *    (RQ_DUPLICATES_COALESCE adds it as an independent request).
 *  Errors: RQ_ERR_INVALID_ARGUMENT (empty path), RQ_ERR_INVALID_STATE (a body callback is set),
 *  RQ_ERR_REQUEST_FROZEN. */
RQ_API rq_result rq_request_set_output_file(rq_request *request, const char *path, int resume);

/* ===================================================================================================
 * Transport settings and queue defaults
 * ===================================================================================================
 *
 * Not exposed: HSTS and alt-svc. Debian's libcurl has both, and both stay off (libcurl turns them
 * on only when asked). alt-svc lets a server move later requests to another host, port or
 * protocol (HTTP/3, which this libcurl lacks): requests would then go where the URL checks and
 * the per-host limits and counts of the queue do not see them. HSTS (a cache of hosts that asked
 * to be reached over https only) protects URLs a person types; a program chooses its URLs, and
 * the Strict-Transport-Security header is in the response headers for a caller that keeps such
 * a list. Both would also need a cache file per queue kept across runs. */

/** Transport settings of a request, set with `rq_request_set_option_string` (S) or
 *  `rq_request_set_option_int` (I). Each is unset until set; an unset setting takes the queue's
 *  default (see `rq_queue_get_defaults`), else the library's default given here. A string setting
 *  set to NULL is unset again. Values are checked when set: a value out of its range, or an option
 *  given to the setter of the other type, gives RQ_ERR_INVALID_ARGUMENT. Files named here are read
 *  when the request runs (a missing or bad one fails the request with RQ_OUTCOME_TLS). Values are
 *  never renumbered. */
typedef enum rq_option {
    /** I. Content decoding, on by default (as requests, httpx, aiohttp and OkHttp do): the request
     *  sends `Accept-Encoding` with every encoding this libcurl decodes (Debian's: deflate, gzip,
     *  br, zstd) and the body, the progress figures and the streamed pieces are the decoded bytes.
     *  0: no Accept-Encoding is sent and a body arrives as the server sent it (raw bytes, even if a
     *  Content-Encoding header says it is compressed). An Accept-Encoding header set on the request
     *  replaces the library's; with decoding on, what the server sends in any of the encodings above
     *  is still decoded. A body that does not decode ends the attempt with RQ_OUTCOME_BAD_RESPONSE.
     *  With a body callback or an output file, while the transfer is paused (see
     *  `rq_request_set_body_callback`) libcurl keeps the decoded rest of the network read it was
     *  decoding: a streamed, decoded transfer reads the network 16 KiB at a time, so this rest is
     *  at most 16 KiB times the compression ratio (about 1030:1 for gzip at worst), and libcurl 7.88
     *  copies it again when the transfer resumes. Measured: 256 MiB of gzip-compressed zeros
     *  streamed to a slow callback raised the peak RSS by 13 to 48 MiB, depending on how often the
     *  callback's pace paused and resumed the transfer. */
    RQ_OPTION_DECODE_CONTENT = 1,
    /** S. The User-Agent header. Default: "librequestqueue/<version> libcurl/<version>". "" sends no
     *  User-Agent. A User-Agent header set on the request wins over this setting. */
    RQ_OPTION_USER_AGENT = 2,
    /** S. The proxy, a URL with scheme http, https (TLS to the proxy), socks4, socks4a, socks5 or
     *  socks5h (the proxy resolves host names), optional credentials (`socks5://user:pw@host:1080`,
     *  percent-encoded) and port (default 1080 for SOCKS, 80 for http, 443 for https proxies). ""
     *  uses no proxy at all. Unset: like curl, libcurl honours the environment variables
     *  `http_proxy`, `https_proxy` (`HTTPS_PROXY`), `all_proxy` and `no_proxy`; set "" to ignore
     *  them. A failed proxy connection ends the attempt with RQ_OUTCOME_CANNOT_CONNECT, an unknown
     *  proxy host with RQ_OUTCOME_CANNOT_RESOLVE_HOST, a refused SOCKS handshake with
     *  RQ_OUTCOME_TRANSPORT. An https proxy's certificate and name are always verified, against the
     *  system CAs or RQ_OPTION_PROXY_CA_FILE (RQ_OPTION_UNSAFE_NO_TLS_VERIFY does not apply to the
     *  proxy); a failure ends the attempt with RQ_OUTCOME_TLS or RQ_OUTCOME_TRANSPORT. */
    RQ_OPTION_PROXY = 3,
    /** S. Hosts reached without the proxy: comma-separated names (a name matches itself and its
     *  subdomains), IP addresses, or "*" for all. Replaces the environment's `no_proxy`. */
    RQ_OPTION_NO_PROXY = 4,
    /** S. Client certificate for TLS, a PEM file (it may hold the key too). */
    RQ_OPTION_CLIENT_CERT = 5,
    /** S. The client certificate's private key, a PEM file. */
    RQ_OPTION_CLIENT_KEY = 6,
    /** S. The passphrase of the private key. */
    RQ_OPTION_KEY_PASSWORD = 7,
    /** S. Public key pinning: "sha256//<base64>" (several joined with ';') or a PEM/DER file of
     *  the key. A server whose key does not match fails with RQ_OUTCOME_TLS. */
    RQ_OPTION_PINNED_PUBLIC_KEY = 8,
    /** S. A directory of CA certificates (OpenSSL's c_rehash layout) to verify servers with, in
     *  addition to the CA file. */
    RQ_OPTION_CA_DIRECTORY = 9,
    /** I. Minimum TLS version: RQ_TLS_1_0 ... RQ_TLS_1_3, or 0 for libcurl's default (TLS 1.2 with
     *  Debian's OpenSSL settings). */
    RQ_OPTION_TLS_MIN_VERSION = 10,
    /** I. UNSAFE. Non-zero turns off verification of the server's certificate and host name (curl
     *  -k): anyone on the path can read and change the exchange. For test servers only. 0 (the
     *  default) verifies. */
    RQ_OPTION_UNSAFE_NO_TLS_VERIFY = 11,
    /** S. Connect to this Unix domain socket path (at most 107 bytes) instead of the URL's host and
     *  port; the URL still gives the Host header and the path. */
    RQ_OPTION_UNIX_SOCKET = 12,
    /** S. Pin a host and port to addresses, as curl --resolve: "host:port:address[,address...]"
     *  (IPv6 addresses in brackets). Each call adds one entry (at most 1000); NULL removes them
     *  all. A request with resolve overrides, a local interface or an IP version always makes its
     *  own connection and does not keep it for others (libcurl matches connections by host name,
     *  not address), and the overrides do not outlive the request. */
    RQ_OPTION_RESOLVE = 13,
    /** S. The local interface name, IP address or host name to connect from ("eth0",
     *  "192.0.2.1", "if!eth0", "host!name"), as curl --interface. */
    RQ_OPTION_INTERFACE = 14,
    /** I. RQ_IP_ANY (default), RQ_IP_V4 or RQ_IP_V6: which addresses of the host to use. */
    RQ_OPTION_IP_VERSION = 15,
    /** I. TCP keep-alive: seconds of idleness before the first probe and between probes (1 ...
     *  86400); 0 (default) sends none. It is set on the connections the request opens
     *  (SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL); a connection kept open by an earlier request of
     *  the queue is reused as it was made (libcurl does not compare this setting when it reuses
     *  connections). */
    RQ_OPTION_TCP_KEEPALIVE = 16,
    /** I. Maximum average receive speed of the transfer, bytes per second; 0 (default) is none.
     *  libcurl checks it between bursts of reads: it reads what the socket holds, up to 100 reads
     *  at once. With a limit, the library makes each read a hundredth of the limit (1 KiB to
     *  16 KiB), so a burst is at most about one second's worth (or 100 KiB): a body of S bytes
     *  takes at least about S / limit - 1 seconds. */
    RQ_OPTION_MAX_RECV_SPEED = 17,
    /** I. Maximum average send speed of the transfer, bytes per second; 0 (default) is none. */
    RQ_OPTION_MAX_SEND_SPEED = 18,
    /** I. HTTP version: RQ_HTTP_VERSION_DEFAULT (HTTP/2 over TLS when the server offers it,
     *  HTTP/1.1 otherwise; with libcurl before 8.1.0, HTTP/1.1 for a request body over 64 KiB:
     *  see HTTP/2 in "What a server sends"), RQ_HTTP_VERSION_1_1 (never HTTP/2), RQ_HTTP_VERSION_2_PRIOR_KNOWLEDGE
     *  (cleartext HTTP/2 without upgrade, "h2c"; over TLS as the default). The version used is
     *  `rq_response_http_version` (and `rq_metrics.http_version`). With Debian's libcurl 7.88.1, a
     *  second h2c request on a kept connection fails (libcurl: "Error in the HTTP2 framing
     *  layer"); the library does not keep h2c connections (each h2c request makes
     *  its own). */
    RQ_OPTION_HTTP_VERSION = 19,
    /** I. Non-zero: the request uses its queue's cookie jar (`rq_queue_cookies_list`): it sends the
     *  cookies that match its URL and stores those the server sets, with libcurl's domain, path,
     *  expiry and Secure rules. libcurl checks a cookie's Domain against the Public Suffix List
     *  (libpsl, which Debian's libcurl uses): a server cannot set a cookie for a public suffix such
     *  as co.uk, only for its own site. Off by default. A Cookie header set on the request (or
     *  its queue's defaults) is sent in the same line, after the jar's cookies: one Cookie line,
     *  as RFC 6265 5.4 wants ("Cookie: <the jar's>; <yours>"). As without the jar, your own
     *  cookies go only to the scheme, host and port of the request's URL (not after a redirect
     *  elsewhere, again after one back there), and they are not stored in the jar. */
    RQ_OPTION_COOKIES = 20,
    /** S. CA certificates (a PEM file) to verify an https:// proxy's certificate with, instead of
     *  the system's. */
    RQ_OPTION_PROXY_CA_FILE = 21
} rq_option;

#define RQ_TLS_1_0 10
#define RQ_TLS_1_1 11
#define RQ_TLS_1_2 12
#define RQ_TLS_1_3 13
#define RQ_IP_ANY 0
#define RQ_IP_V4 4
#define RQ_IP_V6 6
#define RQ_HTTP_VERSION_DEFAULT 0
#define RQ_HTTP_VERSION_1_1 11
#define RQ_HTTP_VERSION_2_PRIOR_KNOWLEDGE 20

/** Sets a string transport setting (see `rq_option`); NULL unsets it. Errors:
 *  RQ_ERR_INVALID_ARGUMENT (unknown option, an integer option, or a value it does not accept:
 *  a proxy URL of another scheme, a resolve entry not host:port:address, an empty path),
 *  RQ_ERR_REQUEST_FROZEN. */
RQ_API rq_result rq_request_set_option_string(rq_request *request, rq_option option, const char *value);

/** Sets an integer transport setting (see `rq_option`). Errors: RQ_ERR_INVALID_ARGUMENT (unknown
 *  option, a string option, or a value out of range), RQ_ERR_REQUEST_FROZEN. */
RQ_API rq_result rq_request_set_option_int(rq_request *request, rq_option option, int64_t value);

/** The queue's defaults, as a request handle owned by the queue (valid until the queue is freed;
 *  never freed, added or started: those calls give RQ_ERR_INVALID_STATE). Configure it with the
 *  usual setters: at `rq_add`, a request takes from it every setting it did not set itself, like
 *  httpx's `Client(headers=..., timeout=...)` or OkHttp's client builder. A request's own value
 *  always wins, even when it equals the library's default. Changing the defaults affects the
 *  requests added afterwards, not those already added. Inherited:
 *    - headers: each default header whose name the request neither set nor removed (with a NULL
 *      value) is added after the request's own;
 *    - timeouts (total, connect, idle, response headers, low-speed limit), credentials, maximum
 *      redirects, maximum response size, CA file, and each retry setting (on/off, delay,
 *      outcomes, backoff, statuses, non-idempotent, maximum attempts) separately (a
 *      response-header or low-speed limit set by neither follows the request's idle timeout, its
 *      own or inherited);
 *    - every `rq_option`.
 *  Not inherited: URL, method, body, callbacks, priority, tag, output file. The defaults count
 *  for duplicate detection as the request's own headers. The standalone queue of
 *  `rq_request_start` has no defaults; `rq_queue_default()` has. Errors: RQ_ERR_NULL_ARGUMENT,
 *  RQ_ERR_INVALID_HANDLE, RQ_ERR_QUEUE_CLOSED (being freed). */
RQ_API rq_result rq_queue_get_defaults(rq_queue *queue, rq_request **out_defaults);

/** Limits the connections the queue's transfers use: at most `total` open at once and
 *  `per_host` to one host (scheme, host and port); 0 (the default) is no limit. These are
 *  libcurl's connection limits, beside the request limits (`rq_queue_set_max_concurrent`,
 *  `rq_queue_set_max_per_host`): with HTTP/2 several running requests share one connection; over
 *  HTTP/1.1, a running request that finds no free connection under the limit waits inside
 *  libcurl for one, and that wait counts toward its timeouts. Takes effect when the next request
 *  starts. Idle connections are kept for reuse, up to 4 per request that ran at once at the
 *  queue's busiest (so a quiet moment does not close what a busy one opened), each closed after
 *  118 s unused (libcurl's CURLOPT_MAXAGE_CONN) or when the server closes it.
 *  Errors: RQ_ERR_INVALID_ARGUMENT (above 100000). */
RQ_API rq_result rq_queue_set_max_connections(rq_queue *queue, size_t total, size_t per_host);

/** Reads the limits of `rq_queue_set_max_connections`. Errors: RQ_ERR_NULL_ARGUMENT. */
RQ_API rq_result rq_queue_get_max_connections(rq_queue *queue, size_t *out_total, size_t *out_per_host);

/** The HTTP version of the response: 10 (HTTP/1.0), 11, 20 (HTTP/2) or 30; 0 when the last
 *  attempt received no status line (cancelled, connection failures), or for NULL. Also in
 *  `rq_metrics.http_version`. */
RQ_API int rq_response_http_version(const rq_response *response);

/** The queue's cookies (those stored by requests with RQ_OPTION_COOKIES, or loaded), as the lines
 *  of a Netscape cookie file ("domain\tsubdomains\tpath\tsecure\texpiry\tname\tvalue\n"; a
 *  domain of "#HttpOnly_..." marks an HttpOnly cookie), in a NUL-terminated string to free with
 *  `rq_string_free`; "" when there are none. At most 3000 cookies and 1 MiB: see "Cookies" in
 *  the opening notes for the jar's budget. Errors: RQ_ERR_NULL_ARGUMENT, RQ_ERR_INVALID_HANDLE,
 *  RQ_ERR_OUT_OF_MEMORY, RQ_ERR_QUEUE_CLOSED (the queue is being freed by another thread). */
RQ_API rq_result rq_queue_cookies_list(rq_queue *queue, char **out_text);

/** Frees a string handed out by the library (`rq_queue_cookies_list`). NULL is ignored. */
RQ_API void rq_string_free(char *text);

/** Removes every cookie of the queue. Errors: RQ_ERR_NULL_ARGUMENT, RQ_ERR_INVALID_HANDLE,
 *  RQ_ERR_QUEUE_CLOSED (the queue is being freed by another thread). */
RQ_API rq_result rq_queue_cookies_clear(rq_queue *queue);

/** Adds the cookies of a Netscape cookie file (as curl -b/-c and browsers' exports write them; or
 *  a file of "Set-Cookie:" lines) to the queue's jar. Lines that are not cookies are skipped.
 *  The jar's budget applies (see "Cookies" in the opening notes): when the jar and the file
 *  together exceed it, the oldest go first, then cookies of the file, in libcurl's order.
 *  Errors: RQ_ERR_NULL_ARGUMENT, RQ_ERR_INVALID_HANDLE, RQ_ERR_SYSTEM (the file cannot be read),
 *  RQ_ERR_QUEUE_CLOSED (the queue is being freed by another thread). */
RQ_API rq_result rq_queue_cookies_load(rq_queue *queue, const char *path);

/** Writes every cookie of the queue to a Netscape cookie file at `path` (created or replaced),
 *  session cookies included. Errors: RQ_ERR_NULL_ARGUMENT, RQ_ERR_INVALID_HANDLE, RQ_ERR_SYSTEM
 *  (the file cannot be written), RQ_ERR_QUEUE_CLOSED (the queue is being freed by another thread). */
RQ_API rq_result rq_queue_cookies_save(rq_queue *queue, const char *path);

/* ===================================================================================================
 * Metrics
 * =================================================================================================== */

/** Figures of one request, read from its response (see `rq_response_metrics`). Times are seconds;
 *  -1 means "does not apply" (no attempt started, no TLS, the step was not reached). */
typedef struct rq_metrics {
    /** Set by the caller to sizeof(rq_metrics), so that later versions can add fields. On return,
     *  the number of bytes written. */
    size_t size;
    /** From `rq_add` (or `rq_request_start`) to the start of the first attempt: the time spent
     *  waiting in the queue. */
    double queued;
    /** From the start of the last attempt to: the host name resolved, the connection made, the
     *  TLS handshake done (-1 over plain http), the first byte of the response received, and the
     *  end of the attempt. They never decrease in this order (dns <= connect <= tls <= first_byte
     *  <= total, leaving out those at -1). On a reused connection, dns and connect are near 0.
     *  After redirects, dns to first_byte add up their times over the exchanges of the attempt
     *  (as libcurl reports them), and total spans them all. */
    double dns;
    double connect;
    double tls;
    double first_byte;
    double total;
    /** Body bytes received and sent by the last attempt (for a resumed download: the bytes of
     *  this transfer, not those already in the file). `bytes_down` counts the decoded body of the
     *  final response, as delivered (see `wire_bytes_down` below). */
    uint64_t bytes_down;
    uint64_t bytes_up;
    /** The number of attempts made, as `rq_response_attempts`. */
    unsigned attempts;
    /** 1 when the last attempt used a connection kept open by an earlier request, 0 when it made a
     *  new one (or made none). */
    int connection_reused;
    /* Fields added later: a caller built with an older header (a smaller `size`) does not get them. */
    /** The body of the last response as it came from the server, before any decoding of libcurl's
     *  own (chunked framing not counted). `bytes_down` above is the decoded body, the bytes
     *  delivered; the two differ when a Content-Encoding was decoded. */
    uint64_t wire_bytes_down;
    /** Bytes of the status lines and header lines of every response of the last attempt
     *  (redirects and 1xx included), as received. */
    uint64_t header_bytes_down;
    /** The HTTP version of the last response, as `rq_response_http_version`: 10 (HTTP/1.0), 11,
     *  20 (HTTP/2) or 30; 0 when the last attempt received no status line. */
    int http_version;
} rq_metrics;

/** Writes the metrics of the request that `response` completes (a borrowed response, in the
 *  completion or an authentication challenge) into `*out_metrics`. Set `out_metrics->size` to
 *  sizeof(rq_metrics) first: a smaller size gets only the fields that fit; a size too small for the
 *  first field gives RQ_ERR_INVALID_ARGUMENT. The completion of a cancelled request has no
 *  figures of a transfer: every time is -1 and the byte counts are 0 (`attempts` counts the
 *  attempts made, 0 when it never started). Errors: RQ_ERR_NULL_ARGUMENT, RQ_ERR_INVALID_ARGUMENT. */
RQ_API rq_result rq_response_metrics(const rq_response *response, rq_metrics *out_metrics);

/* ===================================================================================================
 * Calls that do the work of several
 * =================================================================================================== */

/* For callers where each call into the library has a cost of its own (Python's cffi, Ruby's ffi:
 * about 3,000 instructions a call), and for C programs that make many plain requests: each of
 * these does in one call what the functions it names do, with the same results and errors. */

/** Makes a GET request for `url`, gives it its completion (`completion`, `context` and
 *  `context_free`, as `rq_request_set_completion`; each may be NULL) and adds it to `queue`: what
 *  `rq_request_new`, `rq_request_set_completion` and `rq_add` do, in one call. On RQ_OK,
 *  `*out_request` is the request's handle, owned by the caller as one from `rq_request_new`
 *  (free it with `rq_request_free` whenever you like: the queue keeps what it needs, and its
 *  completion still runs). On failure nothing was made: no request, no callback, and
 *  `context_free` is not called (the context is still the caller's). The URL is checked before
 *  the queue, as `rq_request_new` then `rq_add` would. Errors: RQ_ERR_NULL_ARGUMENT (`url`, `out_request` or
 *  `queue` NULL), RQ_ERR_INVALID_URL, RQ_ERR_UNSUPPORTED_SCHEME, RQ_ERR_OUT_OF_MEMORY (as
 *  `rq_request_new`), RQ_ERR_INVALID_HANDLE (`queue`), RQ_ERR_QUEUE_CLOSED (the queue is being
 *  freed). */
RQ_API rq_result rq_add_url(rq_queue *queue, const char *url, rq_completion_fn completion, void *context,
                            rq_context_free_fn context_free, rq_request **out_request);

/** A completion that receives its response retained, with the figures `rq_response_get_summary`
 *  would read (`outcome`, `status`, `http_version`, and the body: `body`, never NULL, and
 *  `body_size`) as arguments: what an `rq_completion_fn` that calls `rq_response_retain_summary`
 *  gets, with no call into the library. Called exactly once per accepted request, when and where
 *  an `rq_completion_fn` would be, `request` valid during the call as for one. The callback owns
 *  one reference to `response`: release it with `rq_response_release` or
 *  `rq_response_release_many`, during the callback or at any time after, from any thread (until
 *  then, `response` and `body` stay valid and readable with every `rq_response_*` function). */
typedef void (*rq_summary_completion_fn)(void *context, rq_request *request, rq_response *response,
                                         rq_outcome outcome, int status, int http_version,
                                         const uint8_t *body, size_t body_size);

/** `rq_request_set_completion` with an `rq_summary_completion_fn`: sets the request's completion
 *  callback (replacing one set by either function; a request has one completion callback), the
 *  context given to every callback of the request and its optional finalizer. `fn` may be NULL (no
 *  completion callback). Errors: those of `rq_request_set_completion`. */
RQ_API rq_result rq_request_set_summary_completion(rq_request *request, rq_summary_completion_fn fn, void *context,
                                                   rq_context_free_fn context_free);

/** `rq_add_url` with an `rq_summary_completion_fn`: a GET of `url` with that completion, its
 *  context and finalizer, added to `queue`, in one call, with the results, errors and
 *  out-parameter of `rq_add_url`. */
RQ_API rq_result rq_add_url_with_summary(rq_queue *queue, const char *url, rq_summary_completion_fn completion,
                                         void *context, rq_context_free_fn context_free, rq_request **out_request);

/** `rq_response_get_summary`, and the response retained as by `rq_response_retain` when it
 *  returns RQ_OK (release it with `rq_response_release` or `rq_response_release_many`): the
 *  summary's `body` then stays valid after the callback. On an error nothing is retained. Errors:
 *  those of `rq_response_get_summary`. */
RQ_API rq_result rq_response_retain_summary(const rq_response *response, rq_response_summary *out_summary);

/** Releases `count` retained responses, as `rq_response_release` does each (NULL entries are
 *  skipped; `responses` is ignored when it is NULL, and so is a `count` above PTRDIFF_MAX, which no
 *  array can have). */
RQ_API void rq_response_release_many(const rq_response *const *responses, size_t count);

/** Frees `count` requests, as `rq_request_free` does each, in order (NULL entries are skipped, as
 *  `rq_request_free(NULL)` is). Every entry is tried: on an error the others are still freed, and
 *  the result is the first error (`rq_last_error_message` names its index). Errors:
 *  RQ_ERR_NULL_ARGUMENT (`requests` NULL with a `count` > 0), RQ_ERR_INVALID_ARGUMENT (`count` above
 *  PTRDIFF_MAX: nothing is freed), and those of `rq_request_free`. */
RQ_API rq_result rq_request_free_many(rq_request *const *requests, size_t count);

#ifdef __cplusplus
}
#endif

#endif /* REQUESTQUEUE_H */
