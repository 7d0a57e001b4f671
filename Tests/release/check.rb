# Run by scripts/test-release with only the installed gem on the load path:  ruby check.rb BASE_URL
# Prints the versions the installed gem reports, where its library was loaded from, and what a
# request to the fixture server fetched.
require "requestqueue"

base = ARGV.fetch(0)
spec = Gem.loaded_specs.fetch("requestqueue")
puts "versions #{RequestQueue::VERSION} #{RequestQueue.library_version} #{spec.version}"
puts "library #{RequestQueue.library_path}"
puts "licence #{spec.licenses.join(",")} #{spec.homepage}"
body = RequestQueue.request("#{base}/bytes?n=42", timeout: 30).value!.body
puts "fetched #{body.bytesize} bytes"
