# frozen_string_literal: true

require_relative "test_helper"

# Building requests, what the server receives, what the response holds, and errors.
class TestRequests < Minitest::Test
  PATTERN = "abcdefghijklmnopqrstuvwxyz0123456789"

  def fetch(target, **options)
    queue = new_queue
    response = nil
    queue.add(target, **options) { |r| response = r }
    assert queue.run
    response
  end

  def test_get_copies_status_body_headers_and_url
    response = fetch(url("/bytes?n=100&id=get&header=X-Extra:one"))
    assert response.ok?
    assert response.success?
    assert_equal :ok, response.outcome
    assert_equal 200, response.status
    assert_equal (PATTERN * 3)[0, 100], response.body
    assert_equal Encoding::BINARY, response.body.encoding
    assert_equal "100", response["content-length"]
    assert_equal "one", response.header("X-EXTRA")
    assert_nil response["x-missing"]
    assert_equal "application/octet-stream", response.header_hash["content-type"]
    names = response.headers.map(&:first)
    assert_operator names.index("Content-Type"), :<, names.index("X-Extra"), "headers keep the order received"
    assert_equal url("/bytes?n=100&id=get&header=X-Extra:one"), response.url
    assert_equal 1, response.attempts
    assert_equal "", response.error_message
    assert_nil response.error
    assert_same response, response.value!
    assert response.frozen?
    entries = logged("get")
    assert_equal 1, entries.size
    assert_equal "GET", entries[0]["method"]
  end

  def test_method_headers_and_binary_body_reach_the_server
    body = (0..255).map(&:chr).join.b * 2
    response = fetch(url("/echo"), method: :put, headers: { "X-Custom" => "v1", "Accept" => "text/x" },
                                   body: body)
    echo = JSON.parse(response.body)
    assert_equal "PUT", echo["method"]
    assert_equal "v1", echo["headers"]["x-custom"]
    assert_equal "text/x", echo["headers"]["accept"]
    assert_equal 512, echo["body_len"]
    assert_equal body, echo["body"].encode("ISO-8859-1").b
  end

  def test_method_strings_are_sent_as_given
    echo = JSON.parse(fetch(url("/echo"), method: "PATCH", body: "x").body)
    assert_equal "PATCH", echo["method"]
    assert_equal "x", echo["body"]
  end

  def test_params_and_form_bodies_are_encoded
    echo = JSON.parse(fetch(url("/echo?a=1"), method: :post, params: { q: "a b", n: 2 },
                                              body: { "name" => "x&y", "v" => "1" }).body)
    assert_equal "/echo?a=1&q=a+b&n=2", echo["path"]
    assert_equal "name=x%26y&v=1", echo["body"]
    assert_equal "application/x-www-form-urlencoded", echo["headers"]["content-type"]
  end

  def test_headers_as_pairs_keep_order_and_nil_removes
    echo = JSON.parse(fetch(url("/echo"), headers: [%w[X-A 1], %w[X-B 2], ["X-A", nil]]).body)
    refute echo["headers"].key?("x-a")
    assert_equal "2", echo["headers"]["x-b"]
  end

  def test_credentials_are_sent_with_the_first_attempt
    response = fetch(url("/basic-auth/user/pw?id=cred"), credentials: %w[user pw])
    assert_equal 200, response.status
    assert_equal({ "authenticated" => true, "user" => "user" }, JSON.parse(response.body))
    entries = logged("cred")
    assert_equal 1, entries.size
    assert entries[0]["headers"]["authorization"].start_with?("Basic ")
  end

  def test_redirects_are_followed
    response = fetch(url("/redirect/2"))
    assert_equal 200, response.status
    assert_equal "redirected", response.body
    assert_equal url("/redirect/0"), response.url
  end

  def test_a_request_built_beforehand_with_block_setters
    queue = new_queue
    request = RequestQueue::Request.new(url("/bytes?n=3"), timeout: 30)
    got = nil
    assert_same request, request.on_complete { |r| got = r }
    assert_equal :new, request.state
    assert_same queue, queue << request
    assert_same queue, request.queue
    queue.run
    assert_equal "abc", got.body
    assert_same request, got.request
    assert_same got, request.response
    assert request.completed?
    assert_equal :completed, request.state
  end

  def test_http_status_errors_carry_the_response
    response = fetch(url("/status/404"))
    refute response.ok?
    assert_equal :http_status, response.outcome
    error = response.error
    assert_instance_of RequestQueue::HTTPStatusError, error
    assert_kind_of RequestQueue::RequestError, error
    assert_equal 404, error.status
    assert_same response, error.response
    assert_equal "status 404", error.response.body
    assert_equal "404", error.response["x-status"]
    assert_equal "The server returned a 404 error", error.message
    raised = assert_raises(RequestQueue::HTTPStatusError) { response.value! }
    assert_equal 404, raised.response.status
  end

  def test_transport_failures_map_to_error_classes
    reset = fetch(url("/reset"))
    assert_equal :connection_lost, reset.outcome
    assert_instance_of RequestQueue::ConnectionLostError, reset.error
    refute_empty reset.error_message

    port = Fixture.get_json("/_/refuse-then-accept?after=600")["port"]
    refused = fetch("http://127.0.0.1:#{port}/")
    assert_equal :cannot_connect, refused.outcome
    assert_raises(RequestQueue::CannotConnectError) { refused.raise_error }
    assert_equal 0, refused.status
  end

  def test_a_reply_that_is_not_http_is_bad_response
    # A real server on 127.0.0.1 that answers in another protocol (requestqueue.h, "What a server sends").
    require "socket"
    listener = TCPServer.new("127.0.0.1", 0)
    server = Thread.new do
      connection = listener.accept
      received = connection.readpartial(65_536)
      connection.write("SSH-2.0-OpenSSH_9.2\r\n")
      connection.close
      received
    end
    response = fetch("http://127.0.0.1:#{listener.addr[1]}/")
    assert server.value.start_with?("GET / HTTP/1.1\r\n")
    assert_equal [:bad_response, 0], [response.outcome, response.status]
    assert_instance_of RequestQueue::BadResponseError, response.error
  ensure
    listener&.close
  end

  def test_timeout
    response = fetch(url("/stall?s=30&id=slow"), timeout: 0.3)
    assert response.timed_out?
    assert_equal :timeout, response.outcome
    assert_instance_of RequestQueue::TimeoutError, response.error
  end

  def test_header_timeout_ends_headers_that_trickle
    # A header line every 0.1 s, never a blank line: never idle, never complete.
    response = fetch(url("/trickle?where=headers&every=0.1"), header_timeout: 0.5)
    assert_instance_of RequestQueue::TimeoutError, response.error
    assert_includes response.error_message, "response headers were not complete 0.5 seconds after"
  end

  def test_low_speed_limit_ends_a_body_that_trickles
    # 10 bytes/s of body, under the limit of 1000 bytes/s over 0.5 s.
    response = fetch(url("/trickle?where=body&every=0.1"), low_speed_limit: [1000, 0.5])
    assert_instance_of RequestQueue::TimeoutError, response.error
    assert_includes response.error_message, "less than 1000.0 bytes per second received or sent over 0.5 seconds"
  end

  def test_header_timeout_and_low_speed_limit_come_from_the_queue_defaults
    # Each request sets its own total timeout: a limit not inherited would end it with that one.
    run_one = lambda do |queue, path, **options|
      response = nil
      queue.add(url(path), **options) { |r| response = r }
      assert queue.run
      response
    end
    queue = new_queue(defaults: { header_timeout: 0.5 })
    response = run_one.call(queue, "/trickle?where=headers&every=0.1", timeout: 20)
    assert_includes response.error_message, "response headers were not complete 0.5 seconds after"
    response = run_one.call(queue, "/trickle?where=headers&every=0.1", timeout: 1.5, header_timeout: 0)
    assert_equal :timeout, response.outcome
    refute_includes response.error_message, "response headers"
    queue = new_queue(defaults: { low_speed_limit: [1000, 0.5] })
    response = run_one.call(queue, "/trickle?where=body&every=0.1", timeout: 20)
    assert_includes response.error_message, "less than 1000.0 bytes per second received or sent over 0.5 seconds"
    response = run_one.call(queue, "/trickle?where=body&every=0.1", timeout: 1.5, low_speed_limit: [0, 0])
    assert_equal :timeout, response.outcome
    refute_includes response.error_message, "bytes per second"
    assert_raises(TypeError) { RequestQueue::Queue.new(defaults: { low_speed_limit: 5 }) }
    assert_raises(RequestQueue::InvalidArgumentError) { RequestQueue::Queue.new(defaults: { header_timeout: -1 }) }
  end

  def test_slow_server_limits_are_checked_by_the_library
    [{ header_timeout: -1 }, { header_timeout: Float::NAN }, { header_timeout: 1e7 },
     { low_speed_limit: [-1, 5] }, { low_speed_limit: [1, -5] }, { low_speed_limit: [1e13, 5] },
     { low_speed_limit: [1, Float::INFINITY] }].each do |bad|
      error = assert_raises(RequestQueue::InvalidArgumentError, bad.inspect) { RequestQueue::Request.new(url("/"), **bad) }
      assert_includes error.message, bad.keys.first.to_s
    end
    [{ header_timeout: "5" }, { low_speed_limit: 5 }, { low_speed_limit: [1, 2, 3] },
     { low_speed_limit: ["1", 5] }].each do |wrong|
      assert_raises(TypeError, wrong.inspect) { RequestQueue::Request.new(url("/"), **wrong) }
    end
    # 0 turns each off; the largest values allowed pass.
    RequestQueue::Request.new(url("/"), header_timeout: 0, low_speed_limit: [0, 0])
    RequestQueue::Request.new(url("/"), header_timeout: 1e6, low_speed_limit: [1e12, 1e6])
  end

  def test_retry_until_success
    key = "k#{rand(1 << 30)}"
    response = fetch(url("/flaky?key=#{key}&fail=2&mode=reset&id=#{key}"), retry: { delay: 0.05 })
    assert response.ok?
    assert_equal 3, response.attempts
    assert_equal 3, logged(key).size
  end

  def test_retry_stops_at_the_attempt_limit
    key = "k#{rand(1 << 30)}"
    response = fetch(url("/flaky?key=#{key}&fail=5&mode=reset&id=#{key}"), retry: { attempts: 2, delay: 0.01 })
    assert_equal :connection_lost, response.outcome
    assert_equal 2, response.attempts
    assert_equal 2, logged(key).size

    # An Integer is the attempt limit (the delay stays the default 5 s): 1 means no retry.
    key2 = "k#{rand(1 << 30)}"
    once = fetch(url("/flaky?key=#{key2}&fail=5&mode=reset&id=#{key2}"), retry: 1)
    assert_equal :connection_lost, once.outcome
    assert_equal 1, once.attempts
    assert_equal 1, logged(key2).size
  end

  def test_retry_only_chosen_outcomes_and_statuses_only_when_asked
    key = "k#{rand(1 << 30)}"
    none = fetch(url("/flaky?key=#{key}&fail=5&mode=reset&id=#{key}"), retry: { on: [], delay: 0.01 })
    assert_equal 1, none.attempts
    assert_equal 1, logged(key).size

    key2 = "k#{rand(1 << 30)}"
    status = fetch(url("/flaky?key=#{key2}&fail=5&mode=status&id=#{key2}"), retry: { delay: 0.01, attempts: 3 })
    assert_equal :http_status, status.outcome
    assert_equal 503, status.status
    assert_equal 1, status.attempts

    key3 = "k#{rand(1 << 30)}"
    asked = fetch(url("/flaky?key=#{key3}&fail=2&mode=status&id=#{key3}"),
                  retry: { delay: 0.01, attempts: 5, on: %i[http_status connection_lost] })
    assert asked.ok?
    assert_equal 3, asked.attempts
    assert_equal "3", asked["x-attempt"]
  end

  def test_redirect_limit
    none = fetch(url("/redirect/1"), max_redirects: 0)
    assert_equal 302, none.status
    assert none.ok?, "a 3xx delivered as is is not an error"
    assert_equal url("/redirect/1"), none.url
    too_many = fetch(url("/redirect/3"), max_redirects: 2)
    assert_equal :too_many_redirects, too_many.outcome
    assert_instance_of RequestQueue::TooManyRedirectsError, too_many.error
  end

  def test_response_size_limit
    announced = fetch(url("/bytes?n=5000"), max_response_size: 1000)
    assert_equal :response_too_large, announced.outcome
    assert_instance_of RequestQueue::ResponseTooLargeError, announced.error
    counted = fetch(url("/bytes?n=5000&chunked=1"), max_response_size: 1000)
    assert_equal :response_too_large, counted.outcome
    fits = fetch(url("/bytes?n=1000"), max_response_size: 1000)
    assert_equal 1000, fits.body.bytesize
  end

  def test_tls_failures_and_the_ca_file
    # The fixture speaks plain HTTP, so a TLS handshake with it fails; the CA file is used first.
    plain = fetch("https://127.0.0.1:#{Fixture.port}/bytes?n=1")
    assert_equal :tls, plain.outcome
    assert_instance_of RequestQueue::TLSError, plain.error
    with_ca = fetch("https://127.0.0.1:#{Fixture.port}/bytes?n=1", ca_file: "/nonexistent/ca.pem")
    assert_equal :tls, with_ca.outcome
    assert_includes with_ca.error_message, "/nonexistent/ca.pem"
    assert_raises(TypeError) { RequestQueue::Request.new(url("/"), ca_file: 5) }
  end

  def test_errors_carry_the_librarys_reason
    # What exactly was wrong comes from the library (rq_last_error_message), not from the gem.
    {
      -> { RequestQueue::Request.new("http://h/a b") } => [RequestQueue::InvalidURLError, "byte 10 of the URL is a space (0x20): percent-encode it as %20"],
      -> { RequestQueue::Request.new("ftp://h/") } => [RequestQueue::UnsupportedSchemeError, 'the scheme is "ftp": only http and https are supported'],
      -> { RequestQueue::Request.new("http://h/", method: "GE T") } => [RequestQueue::InvalidMethodError, "byte 2 of the method is a space (0x20)"],
      -> { RequestQueue::Request.new("http://h/", headers: { "X-A" => "a\rb" }) } => [RequestQueue::InvalidHeaderError, 'the value of header "X-A" has a carriage return (CR, 0x0D) at byte 1'],
      -> { RequestQueue::Request.new("http://h/", timeout: -1) } => [RequestQueue::InvalidArgumentError, "seconds is -1.0, not a number of seconds from 0 to 1e6"],
    }.each do |make, (klass, reason)|
      error = assert_raises(klass) { make.call }
      assert_includes error.message, reason
      assert_includes RequestQueue::Native.rq_last_error_message, reason
    end
  end

  def test_bad_input_raises_clear_errors
    queue = new_queue
    e = assert_raises(RequestQueue::InvalidURLError) { queue.add("not a url") }
    assert_includes e.message, "not a url"
    assert_raises(RequestQueue::UnsupportedSchemeError) { queue.add("ftp://127.0.0.1/") }
    assert_raises(RequestQueue::InvalidMethodError) { queue.add(url("/"), method: "GE T") }
    assert_raises(RequestQueue::InvalidHeaderError) { queue.add(url("/"), headers: { "X-A" => "a\r\nb" }) }
    assert_raises(RequestQueue::InvalidHeaderError) { queue.add(url("/"), headers: { "Bad Name" => "a" }) }
    assert_raises(ArgumentError) { queue.add(url("/"), headers: { "X-A" => "a\0b" }) }
    assert_raises(RequestQueue::InvalidArgumentError) { queue.add(url("/"), timeout: -1) }
    assert_raises(RequestQueue::InvalidArgumentError) { queue.add(url("/"), timeout: Float::NAN) }
    assert_raises(RequestQueue::InvalidArgumentError) { queue.add(url("/"), retry: { on: [:ok] }) }
    assert_raises(ArgumentError) { queue.add(url("/"), retry: { on: [:bogus] }) }
    assert_raises(ArgumentError) { queue.add(url("/"), retry: { tries: 2 }) }
    assert_raises(ArgumentError) { queue.add(url("/"), retry: -1) }
    assert_raises(ArgumentError) { queue.add(url("/"), max_redirects: -1) }
    assert_raises(ArgumentError) { queue.add(url("/"), max_response_size: 1.5) }
    assert_raises(RequestQueue::InvalidArgumentError) { queue.add(url("/"), max_redirects: 1001) }
    assert_raises(TypeError) { queue.add(url("/"), timeout: "5") }
    assert_raises(TypeError) { queue.add(url("/"), body: 5) }
    assert_raises(TypeError) { queue.add(url("/"), method: 5) }
    assert_raises(TypeError) { queue.add(url("/"), headers: 5) }
    assert_raises(TypeError) { queue.add(url("/"), on_auth: 5) }
    assert_raises(TypeError) { queue.add(nil) }
    assert_raises(ArgumentError) { queue.add(url("/"), bogus: 1) }
    assert_raises(ArgumentError) { RequestQueue::Queue.new(max_concurrent: -1) }
    assert_raises(ArgumentError) { RequestQueue::Queue.new(mode: :random) }
    assert_raises(ArgumentError) { RequestQueue::Queue.new(duplicates: :maybe) }
    assert_raises(ArgumentError) { queue.run(timeout: -1) }
    assert_raises(ArgumentError) { queue.dispatch(-1) }
    assert_raises(TypeError) { queue << "http://x/" }
    assert_equal 0, queue.count
    all = [RequestQueue::InvalidURLError, RequestQueue::InvalidArgumentError, RequestQueue::HTTPStatusError]
    all.each { |klass| assert_operator klass, :<, RequestQueue::Error }
  end

  def test_a_request_is_single_use_and_frozen_once_added
    queue = new_queue
    other = new_queue.suspend
    request = queue.suspend.add(url("/bytes?n=1"))
    assert_raises(RequestQueue::AlreadyAddedError) { queue.add(request) }
    assert_raises(RequestQueue::AlreadyAddedError) { other << request }
    assert_raises(RequestQueue::RequestFrozenError) { request.on_complete { nil } }
    assert_equal 0, other.count
    assert_equal 1, queue.count
  end
end

class TestOneShot < Minitest::Test
  def test_request_runs_one_request_and_returns_its_response
    response = RequestQueue.request(url("/echo"), method: :post, body: "hi", headers: { "X-One" => "1" })
    echo = JSON.parse(response.value!.body)
    assert_equal ["POST", "hi", "1"], [echo["method"], echo["body"], echo["headers"]["x-one"]]
    assert_raises(RequestQueue::HTTPStatusError) { RequestQueue.request(url("/status/500")).value! }
  end
end
