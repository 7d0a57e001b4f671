# Typhoeus' Hydra (Debian's ruby-typhoeus, on ethon and the system libcurl): N requests queued on a
# Hydra with max_concurrency: K, then hydra.run. Small bodies are kept in the response as usual;
# large ones are streamed to an on_body block that counts and discards them.
#
#     ruby rb_typhoeus.rb small|large URL N K
require_relative "benchlib"
require "typhoeus"

kind, url, n, k = BenchLib.args("Typhoeus::Hydra")
done = ok = bytes = 0

started = BenchLib.start
hydra = Typhoeus::Hydra.new(max_concurrency: k)
n.times do
  request = Typhoeus::Request.new(url)
  streamed = 0
  request.on_body { |chunk| streamed += chunk.bytesize } if kind == "large"
  request.on_complete do |response|
    done += 1
    bytes += kind == "large" ? streamed : response.body.bytesize
    if response.success? && response.code == 200
      ok += 1
    elsif ok.zero?
      warn "request failed: #{response.return_code} #{response.code}"
    end
  end
  hydra.queue(request)
end
hydra.run
exit(BenchLib.report(started, done, ok, bytes, kind == "large") ? 0 : 1)
