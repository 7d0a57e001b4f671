# frozen_string_literal: true

# RequestQueue: queues of concurrent HTTP requests for Ruby, on librequestqueue (libcurl).
#
#   require "requestqueue"
#
#   queue = RequestQueue::Queue.new(max_concurrent: 4)
#   queue.add("http://127.0.0.1:8000/") { |response| puts response.status }
#   queue.run
#   queue.close
#
# See RequestQueue::Queue, RequestQueue::Request and RequestQueue::Response.
module RequestQueue
end

require_relative "requestqueue/version"
require_relative "requestqueue/native"
require_relative "requestqueue/errors"
require_relative "requestqueue/headers"
require_relative "requestqueue/form"
require_relative "requestqueue/reaper"
require_relative "requestqueue/response"
require_relative "requestqueue/transport"
require_relative "requestqueue/request"
require_relative "requestqueue/callbacks"
require_relative "requestqueue/queue"

module RequestQueue
  # The version of the loaded librequestqueue, such as "0.1.0".
  def self.library_version
    Native.rq_version_string
  end

  # Runs one request on a queue of its own and returns its Response (whatever the outcome; call
  # #value! on it to raise for errors). Takes the options of Request.new.
  #
  #   body = RequestQueue.request("http://127.0.0.1:8000/", timeout: 10).value!.body
  def self.request(url, **options)
    Queue.open(max_concurrent: 1) do |queue|
      response = nil
      queue.add(url, **options) { |r| response = r }
      queue.run
      response
    end
  end

  # Where the library was loaded from (see Native.load_library).
  def self.library_path
    Native.library_path
  end
end
