# frozen_string_literal: true

# Fetches a few URLs two at a time and prints what came back.
#   python3 -m http.server 8000 --bind 127.0.0.1 &     # any HTTP server will do
#   ruby examples/fetch.rb http://127.0.0.1:8000
require "requestqueue"

base = ARGV.fetch(0, "http://127.0.0.1:8000")
queue = RequestQueue::Queue.new(max_concurrent: 2)

["/", "/missing", "/?page=2"].each do |path|
  queue.add("#{base}#{path}", timeout: 10, retry: { attempts: 3, delay: 0.5 }) do |response|
    if response.ok?
      puts "#{response.status} #{response.url} (#{response.body.bytesize} bytes)"
    else
      puts "#{response.url}: #{response.error.message}"
    end
  end
end

queue.run   # runs the blocks above on this thread as requests complete
queue.close
