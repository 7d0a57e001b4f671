# frozen_string_literal: true

require_relative "test_helper"
require "tmpdir"

# Transport settings (issue 17) against real nginx, tinyproxy and microsocks, started by
# Tests/Fixtures/transport_servers.py --json for the whole run.
module TransportServers
  class << self
    def endpoints
      return @endpoints if @endpoints

      script = File.join(Fixture::ROOT, "Tests/Fixtures/transport_servers.py")
      @io = IO.popen(["python3", script, "--json"], "r+")
      line = @io.gets or raise "transport servers did not start"
      @endpoints = JSON.parse(line)
      Minitest.after_run do
        @io.close_write
        Process.wait(@io.pid)
      end
      @endpoints
    end
  end
end

class TestTransport < Minitest::Test
  def tx
    TransportServers.endpoints
  end

  # The response, whatever its outcome.
  def get(url, queue = nil, **options)
    own = queue.nil?
    queue ||= RequestQueue::Queue.new
    response = nil
    queue.add(url, **options) { |r| response = r }
    queue.run
    response
  ensure
    queue.close if own && queue
  end

  def test_content_decoding_and_opt_out
    size = tx["text_size"].to_i
    { "/text" => "gzip", "/br" => "br", "/zstd" => "zstd" }.each do |path, encoding|
      response = get(tx["http"] + path)
      assert_equal encoding, response.headers["content-encoding"]
      assert_equal size, response.body.bytesize
      assert response.body.start_with?("line 00000")
    end
    raw = get(tx["http"] + "/text", decode_content: false, headers: { "Accept-Encoding" => "gzip" })
    assert_equal "\x1f\x8b".b, raw.body.b[0, 2]
    assert_equal "", get(tx["http"] + "/ae", decode_content: false).body
    assert_equal :bad_response, get(tx["http"] + "/bad-gzip").outcome
  end

  def test_user_agent_and_queue_defaults
    assert get(tx["http"] + "/ua").body.start_with?("librequestqueue/#{RequestQueue.library_version} libcurl/")
    assert_equal "mine/1", get(tx["http"] + "/ua", user_agent: "mine/1").body
    queue = RequestQueue::Queue.new(defaults: { user_agent: "queue/2", headers: { "X-Default" => "q" },
                                                max_response_size: 100 })
    assert_equal "queue/2", get(tx["http"] + "/ua", queue).body
    assert_equal "own/3", get(tx["http"] + "/ua", queue, user_agent: "own/3").body
    assert_equal "x-default=q x-own=o", get(tx["http"] + "/x-default", queue, headers: { "X-Own" => "o" }).body
    assert_equal :response_too_large, get(tx["http"] + "/text", queue).outcome
    assert_equal :ok, get(tx["http"] + "/text", queue, max_response_size: 0).outcome
    assert_raises(ArgumentError) { RequestQueue::Queue.new(defaults: { on_complete: -> {} }) }
  ensure
    queue&.close
  end

  def test_proxies
    queue = RequestQueue::Queue.new(max_concurrent: 1)
    assert_includes get(tx["http"] + "/via", queue, proxy: tx["proxy"]).body, "rqtestproxy"
    assert_equal "via=", get(tx["http"] + "/via", queue).body
    assert_equal "via=", get(tx["http"] + "/via", queue, proxy: tx["proxy"], no_proxy: ["127.0.0.1"]).body
    assert_includes get(tx["http"] + "/via", queue, proxy: tx["https_proxy"], proxy_ca_file: tx["ca"]).body, "rqtestproxy"
    refute_equal :ok, get(tx["http"] + "/via", queue, proxy: tx["https_proxy"]).outcome
    assert_equal :ok, get(tx["http"] + "/ua", queue, proxy: tx["socks"]).outcome
    refute_equal :ok, get(tx["http"] + "/ua", queue, proxy: tx["socks_bad_password"]).outcome
    assert_raises(RequestQueue::InvalidArgumentError) { RequestQueue::Request.new(tx["http"], proxy: "ftp://p:21") }
  ensure
    queue&.close
  end

  def test_tls_options
    queue = RequestQueue::Queue.new(max_concurrent: 1, defaults: { ca_file: tx["ca"] })
    assert_equal 400, get(tx["mtls"] + "/proto", queue).status
    response = get(tx["mtls"] + "/proto", queue, client_cert: tx["client_cert"], client_key: tx["client_key"],
                                                 key_password: tx["key_password"])
    assert_equal 200, response.status
    assert_includes response.body, "client=CN=rq-client"
    assert_equal :ok, get(tx["tls"] + "/proto", queue, pinned_public_key: tx["pin"]).outcome
    assert_equal :tls, get(tx["tls"] + "/proto", queue, pinned_public_key: tx["wrong_pin"]).outcome
    assert_equal :tls, get(tx["tls"] + "/proto", queue, tls_min_version: "1.3").outcome
    plain = RequestQueue::Queue.new(max_concurrent: 1)
    assert_equal :ok, get(tx["tls"] + "/proto", plain, unsafe_no_tls_verify: true).outcome
    assert_equal :tls, get(tx["tls"] + "/proto", plain).outcome
    assert_equal :ok, get(tx["tls"] + "/proto", plain, ca_dir: tx["ca_dir"]).outcome
  ensure
    queue&.close
    plain&.close
  end

  def test_connections_and_http_version
    queue = RequestQueue::Queue.new(max_concurrent: 1, defaults: { ca_file: tx["ca"] })
    assert_equal "sock.invalid", get("http://sock.invalid/host", queue, unix_socket: tx["unix_socket"]).body
    pinned = "http://pinned.invalid:#{tx["http_port"]}/host"
    assert_equal "pinned.invalid", get(pinned, queue, resolve: "pinned.invalid:#{tx["http_port"]}:127.0.0.1").body
    assert_equal :cannot_resolve_host, get(pinned, queue).outcome
    refute_equal :ok, get(tx["http"] + "/host", queue, ip_version: 6).outcome
    assert_equal :ok, get(tx["http"] + "/host", queue, ip_version: 4, tcp_keepalive: 30, max_recv_speed: 10**6).outcome
    # The version is in the response and in its metrics.
    versions = lambda do |url, **options|
      response = get(url, queue, **options)
      [response.http_version, response.metrics.http_version]
    end
    assert_equal [11, 11], versions.call(tx["http"] + "/proto")
    assert_equal [20, 20], versions.call(tx["tls"] + "/proto")
    assert_equal [11, 11], versions.call(tx["tls"] + "/proto", http_version: "1.1")
    3.times { assert_equal [20, 20], versions.call(tx["h2c"] + "/proto", http_version: "2-prior-knowledge") }
    assert_equal [0, 0], versions.call("http://127.0.0.1:1/proto") # no response
  ensure
    queue&.close
  end

  def test_cookies
    queue = RequestQueue::Queue.new(max_concurrent: 1, defaults: { cookies: true })
    get(tx["http"] + "/cookies/set?name=flavour&value=oat", queue)
    assert_equal "cookie=flavour=oat", get(tx["http"] + "/cookies", queue).body
    assert_equal "cookie=", get(tx["http"] + "/cookies", queue, cookies: false).body
    cookie = queue.cookies.first
    assert_equal %w[flavour oat 127.0.0.1], [cookie.name, cookie.value, cookie.domain]
    Dir.mktmpdir do |dir|
      queue.save_cookies(File.join(dir, "jar.txt"))
      queue.clear_cookies
      assert_empty queue.cookies
      queue.load_cookies(File.join(dir, "jar.txt"))
      assert_equal "cookie=flavour=oat", get(tx["http"] + "/cookies", queue).body
      assert_raises(Errno::ENOENT) { queue.load_cookies(File.join(dir, "missing.txt")) }
    end
  ensure
    queue&.close
  end

  def test_connection_limits
    queue = RequestQueue::Queue.new(max_concurrent: 3, max_connections: 1)
    assert_equal [1, 0], queue.max_connections
    responses = []
    3.times { |i| queue.add(tx["http"] + "/text?#{i}") { |r| responses << r } }
    queue.run
    assert_equal 2, responses.count { |r| r.metrics.connection_reused }
  ensure
    queue&.close
  end
end

begin
  require "requestqueue/faraday"
rescue LoadError
  nil # test_faraday reports the skip
end

if defined?(RequestQueue::FaradayAdapter)
  class TestTransportFaraday < Minitest::Test
    def tx
      TransportServers.endpoints
    end

    def test_faraday_decodes_once_and_maps_ssl_verify_and_proxy
      conn = Faraday.new(url: tx["http"], proxy: tx["proxy"]) { |f| f.adapter :requestqueue }
      response = conn.get("/text")
      assert_equal tx["text_size"].to_i, response.body.bytesize
      assert_nil response.headers["content-encoding"] # decoded: the header goes, as with net_http
      assert_includes conn.get("/via").body, "rqtestproxy"
      unverified = Faraday.new(url: tx["tls"], ssl: { verify: false }) { |f| f.adapter :requestqueue }
      assert unverified.get("/proto").body.start_with?("HTTP/2.0")
      http11 = Faraday.new(url: tx["tls"], ssl: { verify: false }) { |f| f.adapter :requestqueue, http_version: "1.1" }
      assert http11.get("/proto").body.start_with?("HTTP/1.1") # a transport option of the adapter
    end
  end
end
