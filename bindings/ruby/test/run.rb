# frozen_string_literal: true

# Runs the whole suite: ruby -Ilib -Itest test/run.rb [minitest options such as -v or -n NAME]
Dir[File.join(__dir__, "test_*.rb")].sort.each { |file| require file }
