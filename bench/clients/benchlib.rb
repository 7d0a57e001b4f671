# Shared by the Ruby benchmark clients: arguments and the JSON result line
# {"n", "ok", "bytes", "wall", "cpu", "streamed"}; "cpu" is user+sys of the whole process (every
# thread) during the timed phase, which starts before the client creates its engine and ends when
# the last response completed; "streamed" says whether bodies were consumed as they arrived.
module BenchLib
  module_function

  def args(usage)
    kind, url, n, k = ARGV
    unless ARGV.size == 4 && %w[small large].include?(kind) && n.to_i.positive? && k.to_i.positive?
      warn "usage: #{$PROGRAM_NAME} small|large URL N K  (#{usage})"
      exit 2
    end
    [kind, url, n.to_i, [k.to_i, n.to_i].min]
  end

  def cpu
    t = Process.times
    t.utime + t.stime
  end

  def start
    [Process.clock_gettime(Process::CLOCK_MONOTONIC), cpu]
  end

  def report(started, n, ok, bytes, streamed)
    wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started[0]
    used = cpu - started[1]
    $stdout.puts(%({"n": #{n}, "ok": #{ok}, "bytes": #{bytes}, "wall": #{wall}, "cpu": #{used}, ) +
                 %("streamed": #{streamed}}))
    $stdout.flush
    ok == n
  end
end
