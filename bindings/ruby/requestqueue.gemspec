# frozen_string_literal: true

require_relative "lib/requestqueue/version"

# `rake gem` (or scripts/release) first builds librequestqueue with the Swift runtime linked in
# (RQ_STATIC_STDLIB=1 scripts/build-lib release), strips it and copies it to
# lib/requestqueue/native/ with the header requestqueue.h, and LICENSE beside this file: the gem
# then bundles them and is built for this platform (x86_64-linux); it needs only libc, libstdc++
# and libcurl at run time. Without the library copy, `gem build` makes a pure-Ruby gem that loads
# the library from REQUESTQUEUE_LIBRARY or the system loader (librequestqueue.so.0).
# The version and the home page come from the header (see lib/requestqueue/version.rb).
BUNDLED_LIBRARY = "lib/requestqueue/native/librequestqueue.so"
BUNDLED_HEADER = "lib/requestqueue/native/requestqueue.h"

Gem::Specification.new do |spec|
  spec.name = "requestqueue"
  spec.version = RequestQueue::VERSION
  spec.summary = "Queues of concurrent HTTP requests on libcurl, with callbacks on your own thread"
  spec.description = <<~TEXT
    Ruby binding of librequestqueue: queues of concurrent asynchronous HTTP requests (limits,
    FIFO/LIFO, duplicates, retries, timeouts, progress, authentication challenges, cancel,
    suspend/resume) run by libcurl on the library's threads, with every callback dispatched on
    the Ruby thread that runs the queue, and the queue's descriptor usable with IO.select.
  TEXT
  spec.authors = ["RequestQueue developers"]
  spec.license = "MIT"
  spec.homepage = RequestQueue::HOMEPAGE
  spec.metadata = { "homepage_uri" => spec.homepage, "source_code_uri" => spec.homepage }
  spec.required_ruby_version = ">= 2.7"
  spec.files = Dir.glob("lib/**/*.rb", base: __dir__) + %w[README.md requestqueue.gemspec] +
               Dir.glob("examples/*.rb", base: __dir__)
  spec.files << "LICENSE" if File.file?(File.join(__dir__, "LICENSE"))
  spec.files << BUNDLED_HEADER if File.file?(File.join(__dir__, BUNDLED_HEADER))
  if File.exist?(File.join(__dir__, BUNDLED_LIBRARY))
    spec.files << BUNDLED_LIBRARY
    spec.platform = Gem::Platform.local
  end
  spec.require_paths = ["lib"]
  spec.add_runtime_dependency "ffi", ">= 1.15", "< 2"
  spec.add_development_dependency "minitest", "~> 5.0"
end
