# frozen_string_literal: true

require_relative "test_helper"
require "base64"
require "fileutils"
require "openssl"
require "tmpdir"
require "zlib"

begin
  require "requestqueue/faraday"
rescue LoadError => e
  warn "test_faraday: skipped (#{e.message}); scripts/test-ruby installs ruby-faraday"
end

if defined?(RequestQueue::FaradayAdapter)
  # The Faraday adapter :requestqueue with the real Faraday.
  class TestFaraday < Minitest::Test
    include RequestQueueTestHelpers

    PATTERN = "abcdefghijklmnopqrstuvwxyz0123456789"

    def pattern(n)
      (PATTERN * (n / PATTERN.size + 1))[0, n]
    end

    def connection(**options, &block)
      Faraday.new(url: url("/")) do |f|
        block&.call(f)
        f.adapter :requestqueue, **options
      end
    end

    def test_get_post_headers_and_params
      conn = connection
      response = conn.get("/bytes", n: 50, id: "fget", header: "X-Rep:a")
      assert_equal 200, response.status
      assert_equal pattern(50), response.body
      assert_equal "50", response.headers["content-length"]
      assert_equal "a", response.headers["X-REP"]
      echo = JSON.parse(conn.post("/echo", "payload", "X-One" => "1").body)
      assert_equal ["POST", "payload", "1"], [echo["method"], echo["body"], echo["headers"]["x-one"]]
      assert_equal "7", echo["headers"]["content-length"]
    end

    def test_in_parallel_runs_on_one_queue_with_its_limit
      conn = connection(max_concurrent: 2)
      responses = nil
      conn.in_parallel do
        responses = (1..6).map { |i| conn.get("/bytes?n=#{i}&delay=0.2&id=par&group=par") }
        assert responses.none?(&:finished?), "requests complete when the block ends"
      end
      assert_equal (1..6).map { |i| pattern(i) }, responses.map(&:body)
      assert_equal 6, logged("par").size
      assert_equal 2, Fixture.log["peaks"]["par"]
    end

    def test_in_parallel_sends_duplicates
      conn = connection
      responses = nil
      conn.in_parallel { responses = Array.new(3) { conn.get("/bytes?n=4&delay=0.1&id=dup") } }
      assert_equal [200] * 3, responses.map(&:status)
      assert_equal 3, logged("dup").size
    end

    def test_on_data_streams_the_body
      chunks = []
      sizes = []
      response = connection.get("/bytes?n=300000") do |req|
        req.options.on_data = proc { |chunk, size| chunks << chunk; sizes << size }
      end
      assert_equal 200, response.status
      assert_equal pattern(300_000), chunks.join
      assert_equal 300_000, sizes.last
      assert_operator chunks.size, :>, 1
      assert_equal "", response.body
    end

    def test_on_data_sees_status_and_headers_from_the_head_before_the_first_piece
      seen = []
      response = connection.get("/hold?key=rb-faraday&n=20000&first=100&id=rb-faraday") do |req|
        req.options.on_data = proc do |chunk, size, env|
          seen << [env.status, env.response_headers && env.response_headers["content-length"], size] if seen.empty?
          # The server holds the rest of the body until the first piece has been seen.
          Fixture.get_json("/_/release?key=rb-faraday") if size == chunk.bytesize
        end
      end
      assert_equal [[200, "20000", 100]], seen
      assert_equal 200, response.status
      assert_equal "", response.body
    end

    def test_content_encoding_and_length_are_dropped_only_from_a_decoded_body
      conn = connection
      decoded = conn.get("/encoded?coding=gzip&s=hello")
      assert_equal ["hello", nil, nil], [decoded.body, decoded.headers["content-encoding"], decoded.headers["content-length"]]
      # Nothing was decoded: a HEAD and a 304 keep them, as with Faraday's net_http adapter.
      head = conn.head("/encoded?coding=gzip&s=hello")
      assert_equal ["", "gzip", "25"], [head.body, head.headers["content-encoding"], head.headers["content-length"]]
      # Two codings, both decoded by libcurl: the body is plain, the headers go too.
      chained = Zlib.gzip(Zlib::Deflate.deflate("hello"))
      reply = "HTTP/1.1 200 OK\r\nContent-Encoding: deflate, gzip\r\nContent-Length: #{chained.bytesize}\r\n\r\n#{chained}"
      both = conn.get("/raw?b64=#{Base64.urlsafe_encode64(reply, padding: false)}")
      assert_equal ["hello", nil, nil], [both.body, both.headers["content-encoding"], both.headers["content-length"]]
      reply = "HTTP/1.1 304 Not Modified\r\nContent-Encoding: gzip\r\nContent-Length: 25\r\n\r\n"
      not_modified = conn.get("/raw?b64=#{Base64.urlsafe_encode64(reply, padding: false)}")
      assert_equal [304, "gzip", "25"], [not_modified.status, not_modified.headers["content-encoding"],
                                         not_modified.headers["content-length"]]
    end

    def test_the_connections_proxy_and_its_credentials
      # The fixture answers absolute-form requests as a proxy would: it shows what the proxy gets.
      conn = Faraday.new(url: "http://example.test/", proxy: { uri: url("/"), user: "u s+1", password: "p@ss w:rd" }) do |f|
        f.adapter :requestqueue
      end
      seen = JSON.parse(conn.get("/inspect").body)
      assert_equal "http://example.test/inspect", seen["target"]
      authorization = seen["headers"].find { |name, _| name.casecmp?("Proxy-Authorization") }&.last
      assert_equal "u s+1:p@ss w:rd", authorization.to_s.delete_prefix("Basic ").unpack1("m")
    end

    def test_on_data_of_a_decoded_body_sees_the_headers_of_the_decoded_body
      seen = []
      response = connection.get("/encoded?coding=gzip&s=hello") do |req|
        req.options.on_data = proc do |chunk, _size, env|
          seen << [chunk, env.response_headers["content-encoding"], env.response_headers["content-length"]]
        end
      end
      assert_equal [["hello", nil, nil]], seen # the pieces are decoded: the head says so
      assert_nil response.headers["content-encoding"]
    end

    def test_status_errors_with_raise_error_middleware
      conn = connection { |f| f.response :raise_error }
      error = assert_raises(Faraday::ResourceNotFound) { conn.get("/status/404") }
      assert_equal 404, error.response[:status]
      assert_equal 404, connection.get("/status/404").status # without the middleware: a response
      assert_equal 302, connection.get("/redirect/1").status # redirects are the middleware's job
    end

    def test_errors_are_faradays
      closed = Fixture.get_json("/_/refuse-then-accept?after=3600")["port"]
      conn = Faraday.new(url: "http://127.0.0.1:#{closed}") { |f| f.adapter :requestqueue }
      assert_raises(Faraday::ConnectionFailed) { conn.get("/") }
      assert_raises(Faraday::TimeoutError) do
        connection.get("/stall?s=30&id=ftime") { |req| req.options.timeout = 0.3 }
      end
      assert_equal 1, logged("ftime").size
      assert_raises(Faraday::ConnectionFailed) { connection.get("/reset") }
    end

    def test_a_read_timeout_shorter_than_the_write_timeout_is_honoured
      # The server closes after 3 s without a byte: read_timeout 0.5 s must end the wait first.
      [[:get, nil], [:post, "payload"]].each do |method, body|
        id = "fread-#{method}"
        assert_raises(Faraday::TimeoutError) do
          connection.run_request(method, "/stall?s=3&id=#{id}", body, {}) do |req|
            req.options.read_timeout = 0.5
            req.options.write_timeout = 10
          end
        end
        assert_equal 1, logged(id).size
      end
    end

    # An HTTPS instance of the fixture server with a self-signed certificate made by openssl.
    def with_https_server
      Dir.mktmpdir do |dir|
        cert = File.join(dir, "cert.pem")
        key = File.join(dir, "key.pem")
        made = system("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-keyout", key,
                      "-out", cert, "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                      out: File::NULL, err: File::NULL)
        skip "the openssl command is needed to make a test certificate" unless made
        io = IO.popen(["python3", Fixture::SERVER, "--exit-on-stdin-eof", "--tls-cert", cert, "--tls-key", key], "r+")
        begin
          port = io.gets.to_s[/\APORT (\d+)/, 1]
          flunk "the HTTPS fixture server did not start" unless port
          yield "https://127.0.0.1:#{port}", cert
        ensure
          io.close_write
          Process.wait(io.pid)
          io.close
        end
      end
    end

    def test_ssl_ca_file_and_ssl_errors
      with_https_server do |base, cert|
        trusted = Faraday.new(url: base, ssl: { ca_file: cert }) { |f| f.adapter :requestqueue }
        assert_equal pattern(5), trusted.get("/bytes?n=5").body
        untrusted = Faraday.new(url: base) { |f| f.adapter :requestqueue } # the system CAs do not trust it
        assert_raises(Faraday::SSLError) { untrusted.get("/bytes?n=5") }
        unverified = Faraday.new(url: base, ssl: { verify: false }) { |f| f.adapter :requestqueue }
        assert_equal pattern(5), unverified.get("/bytes?n=5").body # unsafe: no certificate check
      end
    end

    def test_ssl_ca_path_and_client_certificate_objects
      with_https_server do |base, cert|
        Dir.mktmpdir do |cas|
          FileUtils.cp(cert, File.join(cas, "fixture.pem"))
          skip "openssl rehash is needed for a CA folder" unless system("openssl", "rehash", cas, err: File::NULL)
          trusted = Faraday.new(url: base, ssl: { ca_path: cas }) { |f| f.adapter :requestqueue }
          assert_equal pattern(5), trusted.get("/bytes?n=5").body
        end
        at_least = Faraday.new(url: base, ssl: { ca_file: cert, min_version: :TLS1_2 }) { |f| f.adapter :requestqueue }
        assert_equal pattern(5), at_least.get("/bytes?n=5").body
        bogus = Faraday.new(url: base, ssl: { ca_file: cert, min_version: :SSL3 }) { |f| f.adapter :requestqueue }
        assert_raises(ArgumentError) { bogus.get("/bytes?n=5") }
        # A certificate object cannot be given to libcurl: refused, not silently left out.
        key = OpenSSL::PKey::RSA.new(2048)
        object = Faraday.new(url: base, ssl: { ca_file: cert, client_cert: OpenSSL::X509::Certificate.new(File.read(cert)),
                                               client_key: key }) { |f| f.adapter :requestqueue }
        error = assert_raises(ArgumentError) { object.get("/bytes?n=5") }
        assert_match(/client_cert:/, error.message)
      end
    end

    def test_in_parallel_raises_a_failure_after_the_others_completed
      closed = Fixture.get_json("/_/refuse-then-accept?after=3600")["port"]
      conn = connection
      ok = nil
      assert_raises(Faraday::ConnectionFailed) do
        conn.in_parallel do
          ok = conn.get("/bytes?n=2&id=pok")
          conn.get("http://127.0.0.1:#{closed}/")
        end
      end
      assert ok.finished?
      assert_equal pattern(2), ok.body
    end

    def test_url_encoded_nested_form_through_faraday
      conn = connection { |f| f.request :url_encoded }
      echo = JSON.parse(conn.post("/echo", user: { name: "n" }).body)
      assert_equal "user%5Bname%5D=n", echo["body"]
    end

    def test_requests_of_async_fibers_overlap
      begin
        require "async"
      rescue LoadError
        skip "the async gem is not installed (scripts/test-ruby installs ruby-async)"
      end
      conn = connection
      statuses = []
      Async do |task|
        2.times.map do |i|
          task.async { statuses << conn.get("/bytes?n=1&delay=0.3&id=fib#{i}&group=fibers").status }
        end.each(&:wait)
      end
      assert_equal [200, 200], statuses
      assert_equal 2, Fixture.log["peaks"]["fibers"] # the second fiber's request started while the first waited
    end

    def test_limits_hold_across_threads_and_fibers_of_one_connection
      conn = connection(max_concurrent: 1)
      threads = Array.new(3) { |i| Thread.new { conn.get("/bytes?n=#{i}&delay=0.1&id=thr&group=thr") } }
      assert_equal (0..2).map { |i| pattern(i) }, threads.map { |t| t.value.body }
      assert_equal 1, Fixture.log["peaks"]["thr"]
      begin
        require "async"
      rescue LoadError
        skip "the async gem is not installed (scripts/test-ruby installs ruby-async)"
      end
      bodies = []
      Async do |task|
        Array.new(3) { |i| task.async { bodies << conn.get("/bytes?n=#{i}&delay=0.1&id=fibq&group=fibq").body } }.each(&:wait)
      end
      assert_equal (0..2).map { |i| pattern(i) }, bodies.sort_by(&:size)
      assert_equal 1, Fixture.log["peaks"]["fibq"]
      assert_equal 6, logged("thr", "fibq").size
    end

    def test_unknown_adapter_option_is_refused
      assert_raises(ArgumentError) { connection(max_concurrnt: 2).get("/bytes?n=1") }
    end
  end
end
