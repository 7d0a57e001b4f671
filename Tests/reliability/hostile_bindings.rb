# frozen_string_literal: true

# The hostile server (hostile_server.py) through the Ruby binding: connections closed or reset in
# every phase, conflicting Content-Length values, an unasked 101 and Content-Encoding bombs, for
# collected bodies, on_body and output files. Each request: exactly one completion block, the
# documented outcome, the process alive, and for the bombs the peak RSS within a budget. Then
# queues left to the garbage collector while the server holds their transfers.
#
#   REQUESTQUEUE_LIBRARY=.../librequestqueue.so ruby -Ibindings/ruby/lib \
#     Tests/reliability/hostile_bindings.rb [--tmp DIR] [--rss-budget-mib N]
#
# Prints "hostile_bindings.rb: N checks passed" and exits 0 when every check passed.

require "base64"
require "erb"
require "requestqueue"
require "tmpdir"

$checks = 0

def check(condition, message)
  unless condition
    warn "hostile_bindings.rb: FAIL: #{message}"
    exit 1
  end
  $checks += 1
end

def raw(reply, extra = "")
  "/case/raw?b64=#{ERB::Util.url_encode(Base64.strict_encode64(reply))}#{extra}"
end

def status_kib(field)
  File.foreach("/proc/self/status") { |line| return line.split[1].to_i if line.start_with?("#{field}:") }
  -1
end

def reset_peak
  File.write("/proc/self/clear_refs", "5")
  status_kib("VmRSS")
end

# [reply, query, outcome after a close, body of a complete reply]
PHASES = [
  ["", "", :connection_lost, nil],
  ["HTTP/1.1 200 OK\r\nContent-Le", "", :connection_lost, nil],
  ["HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789", "", :connection_lost, nil],
  ["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n", "", :connection_lost, nil],
  ["HTTP/1.1 200 OK\r\n\r\nclose-delimited", "", :ok, "close-delimited"],
  ["HTTP/1.1 200 OK\r\n\r\nclose-delimited", "&rst=1", :connection_lost, nil],
  ["HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello12", "", :bad_response, nil],
  ["HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\nframes", "", :bad_response, nil]
].freeze

# Runs one request on a queue of its own; returns [response, body size or body].
def run(base, tmp, path, sink, **options)
  completions = []
  streamed = 0
  out = File.join(tmp, "hostile-bindings-rb-out")
  File.delete(out) if File.exist?(out)
  options[:on_body] = ->(chunk, _offset) { streamed += chunk.bytesize } if sink == :on_body
  options[:output_file] = out if sink == :file
  RequestQueue::Queue.open do |queue|
    queue.add(base + path, **options) { |response| completions << response }
    queue.run
  end
  check(completions.size == 1, "#{path} (#{sink}): #{completions.size} completions")
  response = completions.first
  got = case sink
        when :collected then response.body
        when :file then File.exist?(out) ? File.size(out) : 0
        else streamed
        end
  [response, got]
end

tmp = Dir.tmpdir
budget_kib = 256 * 1024
args = ARGV.dup
until args.empty?
  case args.shift
  when "--tmp" then tmp = args.shift
  when "--rss-budget-mib" then budget_kib = Integer(args.shift) * 1024
  else abort "usage: #{$PROGRAM_NAME} [--tmp DIR] [--rss-budget-mib N]"
  end
end

server = IO.popen(["python3", File.join(__dir__, "hostile_server.py"), "--exit-on-stdin-eof"], "r+")
begin
  line = server.gets
  check(line&.start_with?("PORT "), "the hostile server did not start: #{line.inspect}")
  base = "http://127.0.0.1:#{line.split[1]}"

  PHASES.each do |reply, extra, outcome, body|
    %i[collected on_body file].each do |sink|
      response, got = run(base, tmp, raw(reply, extra), sink)
      check(response.outcome == outcome,
            "#{reply[0, 40].inspect}#{extra} (#{sink}): #{response.outcome} (#{response.error_message}), expected #{outcome}")
      next unless body

      expected = sink == :collected ? body : body.bytesize
      check(got == expected, "#{reply[0, 40].inspect} (#{sink}): body #{got.inspect}, expected #{expected.inspect}")
    end
  end

  %w[gzip zstd br].each do |coding|
    %i[on_body file].each do |sink|
      before = reset_peak
      response, got = run(base, tmp, "/case/ce-bomb?coding=#{coding}&sink=#{sink}", sink)
      grown = status_kib("VmHWM") - before
      check(grown <= budget_kib, "#{coding} bomb (#{sink}): the peak RSS grew by #{grown} KiB")
      check((response.outcome == :ok && got == 128 << 20) ||
              (response.outcome == :bad_response && response.error_message.include?("decompression bomb")),
            "#{coding} bomb (#{sink}): #{response.outcome} (#{response.error_message}), #{got} bytes")
    end
    response, got = run(base, tmp, "/case/ce-bomb?coding=#{coding}&limited=1", :collected, max_response_size: 1 << 20)
    check(response.outcome == :response_too_large && got.bytesize <= 1 << 20,
          "#{coding} bomb, at most 1 MiB: #{response.outcome}, #{got.bytesize} bytes")
  end

  # Expiry dates and ages that overflow, read back through Queue#cookies.
  odd = "HTTP/1.1 200 OK\r\nSet-Cookie: e1=1; Expires=Sun, 06 Nov 99999999999 08:49:37 GMT\r\n" \
        "Set-Cookie: e2=1; Max-Age=99999999999999999999\r\nSet-Cookie: e3=1; Max-Age=-99999999999999999999\r\n" \
        "Set-Cookie: e5=1; Max-Age=9223372036854775807\r\nSet-Cookie: e6=\t\x01x\r\nContent-Length: 2\r\n\r\nok"
  RequestQueue::Queue.open do |queue|
    outcome = nil
    queue.add(base + raw(odd), cookies: true) { |response| outcome = response.outcome }
    queue.run
    check(outcome == :ok, "odd cookies: #{outcome}")
    jar = queue.cookies
    check(jar.map(&:name).include?("e2") && (jar.map(&:name) - %w[e1 e2 e3 e5 e6]).empty?, "odd cookies: #{jar.map(&:name)}")
    check(jar.all? { |c| c.expires.is_a?(Integer) && c.expires >= 0 }, "odd cookies: #{jar.inspect}")
  end

  # Bytes that are not UTF-8 in a reason phrase, header names and values, a charset, a Location, a
  # cookie and a body: every part of the response reads back, no exception.
  odd_bytes = ["HTTP/1.1 200 \xff\xfe\x01\r\n: empty\r\n\xff\xfe: \x80\x81\r\nX-A:\xc3\x28\r\n" \
               "Content-Type: text/plain; charset=\xff\r\nContent-Length: 2\r\n\r\nok",
               "HTTP/1.1 302 Found\r\nLocation: /case/status?code=200&x=\xff\xfe\r\nContent-Length: 0\r\n\r\n",
               "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=no-such-charset\r\nContent-Length: 4\r\n\r\n\xff\xfe\x00a",
               "HTTP/1.1 200 OK\r\nSet-Cookie: \xff=\xfe; Path=/\r\nContent-Length: 2\r\n\r\nok"].map(&:b)
  RequestQueue::Queue.open do |queue|
    odd_bytes.each do |reply|
      response = nil
      queue.add(base + raw(reply), cookies: true) { |r| response = r }
      queue.run
      check(response.outcome == :ok && response.status == 200, "#{reply[0, 30].inspect}: #{response.outcome}")
      pairs = response.headers.to_a
      check(pairs.flatten.all?(String) && response.url.is_a?(String) && response.text.is_a?(String),
            "#{reply[0, 30].inspect}: headers #{pairs.inspect}")
    end
    check(queue.cookies.map(&:name) == ["\xFF".b], "odd cookie: #{queue.cookies.inspect}")
  end

  # Queues left to the garbage collector while the server holds their transfers (a bomb and an
  # endless body streamed, a server that never answers, a header line that never ends, an upload
  # never read): the gem frees them from its own thread, and the threads and descriptors of the
  # process come back to what they were.
  resources = -> { [Dir.children("/proc/self/task").size, Dir.children("/proc/self/fd").size] }
  held = ["/case/ce-bomb?coding=zstd&held=1", "/case/endless-error?code=200&held=2", "/case/silent?held=3",
          "/case/endless-header-line?pace=0.05&held=4", "/case/silent?held=5&upload=1"]
  drop = lambda do
    Thread.new do # no stack keeps a reference once the thread is gone
      queue = RequestQueue::Queue.new(max_concurrent: 0, defaults: { idle_timeout: 0, low_speed_limit: [0, 0] })
      held.each do |path|
        options = path.include?("upload") ? { method: "PUT", body: "u" * (8 << 20) } : { on_body: ->(_chunk, _offset) {} }
        queue.add(base + path, **options) { |_response| }
      end
      sleep 0.3 # the transfers reach the server; nobody runs the queue: the streams pause
    end.join
    3.times { GC.start(full_mark: true, immediate_sweep: true) }
    RequestQueue::Reaper.wait
  end
  drop.call # once first, for the threads made on first use (ffi's callback dispatcher)
  baseline = resources.call
  drop.call
  after = resources.call
  check(after == baseline && RequestQueue::Queue::OPEN.empty?,
        "queues dropped with held transfers: threads and descriptors #{after}, before #{baseline}, " \
        "#{RequestQueue::Queue::OPEN.size} queues open")
ensure
  server.close_write
  Process.wait(server.pid)
  server.close
end
puts "hostile_bindings.rb: #{$checks} checks passed"
