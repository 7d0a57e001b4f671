# The Ruby binding (bindings/ruby): N requests added at once to a queue with max_concurrent: K and
# duplicates: :allow, then queue.run, which runs the blocks on this thread. Large bodies go to an
# on_body block that counts and discards each piece when the binding has it (else the library
# delivers each body whole to the completion block, where it is counted and dropped).
#
#     ruby -I bindings/ruby/lib rb_requestqueue.rb small|large URL N K
require_relative "benchlib"
require "requestqueue"

kind, url, n, k = BenchLib.args("RequestQueue::Queue")
stream = kind == "large" && RequestQueue::Request.method_defined?(:on_body)
done = ok = bytes = 0
options = {}
options[:on_body] = ->(data, _offset) { bytes += data.bytesize } if stream

started = BenchLib.start
queue = RequestQueue::Queue.new(max_concurrent: k, duplicates: :allow)
n.times do
  queue.add(url, **options) do |response|
    done += 1
    bytes += response.body.bytesize
    if response.ok? && response.status == 200
      ok += 1
    elsif ok.zero?
      warn "request failed: #{response.outcome} #{response.status}"
    end
  end
end
queue.run
good = BenchLib.report(started, done, ok, bytes, stream)
queue.close
exit(good ? 0 : 1)
