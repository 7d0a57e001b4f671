// Swift's URLSession (FoundationNetworking on Linux, itself built on the system libcurl): K tasks in
// flight, each completion starting the next request, until N have completed. Small bodies arrive
// whole through the completion handler (the usual dataTask(with:completionHandler:)); large ones
// through a delegate that counts and discards each chunk. No cache (urlCache nil).
//
//     urlsession small|large URL N K
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

let args = CommandLine.arguments
guard args.count == 5, args[1] == "small" || args[1] == "large", let url = URL(string: args[2]),
      let n = Int(args[3]), let kArg = Int(args[4]), n > 0, kArg > 0 else {
    FileHandle.standardError.write("usage: urlsession small|large URL N K\n".data(using: .utf8)!)
    exit(2)
}
let large = args[1] == "large"
let k = min(kArg, n)

final class Bench: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    let lock = NSLock()
    var started = 0, done = 0, ok = 0, bytes = 0
    var streamed: [Int: Int] = [:]
    let finished = DispatchSemaphore(value: 0)
    var session: URLSession!
    let url: URL, n: Int, large: Bool

    init(url: URL, n: Int, large: Bool) {
        self.url = url
        self.n = n
        self.large = large
    }

    func record(status: Int, size: Int, error: Error?) {
        lock.lock()
        done += 1
        bytes += size
        if error == nil && status == 200 {
            ok += 1
        } else if ok == 0 {
            FileHandle.standardError.write("request failed: \(String(describing: error)) \(status)\n".data(using: .utf8)!)
        }
        let next = started < n
        if next { started += 1 }
        let last = done == n
        lock.unlock()
        if next { startOne() }
        if last { finished.signal() }
    }

    func startOne() {
        let request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData)
        if large {
            session.dataTask(with: request).resume()
        } else {
            session.dataTask(with: request) { data, response, error in
                self.record(status: (response as? HTTPURLResponse)?.statusCode ?? 0,
                            size: data?.count ?? 0, error: error)
            }.resume()
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.lock()
        streamed[dataTask.taskIdentifier, default: 0] += data.count
        lock.unlock()
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        guard large else { return }
        lock.lock()
        let size = streamed.removeValue(forKey: task.taskIdentifier) ?? 0
        lock.unlock()
        record(status: (task.response as? HTTPURLResponse)?.statusCode ?? 0, size: size, error: error)
    }
}

let cpu0 = cpuSeconds()
let wall0 = DispatchTime.now().uptimeNanoseconds
let bench = Bench(url: url, n: n, large: large)
let configuration = URLSessionConfiguration.default
configuration.urlCache = nil
configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
configuration.httpMaximumConnectionsPerHost = k
bench.session = URLSession(configuration: configuration, delegate: large ? bench : nil, delegateQueue: nil)
bench.lock.lock()
bench.started = k
bench.lock.unlock()
for _ in 0..<k { bench.startOne() }
bench.finished.wait()
let wall = Double(DispatchTime.now().uptimeNanoseconds - wall0) / 1e9
let cpu = cpuSeconds() - cpu0
bench.lock.lock()
print("{\"n\": \(bench.done), \"ok\": \(bench.ok), \"bytes\": \(bench.bytes), \"wall\": \(wall), \"cpu\": \(cpu), \"streamed\": \(large)}")
let good = bench.ok == n
bench.lock.unlock()
fflush(stdout)
exit(good ? 0 : 1)
