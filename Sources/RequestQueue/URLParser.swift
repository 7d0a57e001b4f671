import CCurl
import Glibc
import RequestQueueCore

/// Request URLs are checked by libcurl's own URL parser (`curl_url`), with the flags CURLOPT_URL
/// uses, so that the scheme, host and port the library checks and counts (per-host limits)
/// are those libcurl sends to: one parser, not two that could disagree. The library's own rules
/// (`Validation.urlSyntax`: printable ASCII, http or https, "scheme://") come first. The transfer
/// gives libcurl the URL as given: CURLOPT_URL parses it again with the same flags, which yields
/// the same parts (libcurl's parse is deterministic), without the cost of rebuilding the URL here.
enum URLParser {
    enum Failure: Error {
        case input(InputError)
        case outOfMemory
    }

    /// Parses the NUL-terminated `url` of `bytes.count` bytes.
    static func parse(_ url: UnsafePointer<CChar>, _ bytes: UnsafeBufferPointer<UInt8>) throws(Failure) -> ValidatedURL {
        let https: Bool
        do throws(InputError) { https = try Validation.urlSyntax(bytes) } catch { throw .input(error) }
        guard let handle = curl_url() else { throw .outOfMemory }
        defer { curl_url_cleanup(handle) }
        switch curl_url_set(handle, CURLUPART_URL, url, ccurl_url_set_flags) {
        case CURLUE_OK: break
        case CURLUE_OUT_OF_MEMORY: throw .outOfMemory
        case let code: throw .input(.url("libcurl's URL parser refused it: \(String(cString: curl_url_strerror(code)))"))
        }
        // The parts as libcurl gives them (NULL when absent), freed on return.
        var host: UnsafeMutablePointer<CChar>?, port: UnsafeMutablePointer<CChar>?, zone: UnsafeMutablePointer<CChar>?
        defer {
            curl_free(host)
            curl_free(port)
            curl_free(zone)
        }
        func buffer(_ part: UnsafeMutablePointer<CChar>?) -> UnsafeBufferPointer<UInt8>? {
            part.map { UnsafeBufferPointer(start: UnsafeRawPointer($0).assumingMemoryBound(to: UInt8.self), count: strlen($0)) }
        }
        if curl_url_get(handle, CURLUPART_HOST, &host, 0) == CURLUE_OUT_OF_MEMORY
            || curl_url_get(handle, CURLUPART_PORT, &port, 0) == CURLUE_OUT_OF_MEMORY {
            throw .outOfMemory
        }
        guard let hostBytes = buffer(host) else { throw .input(.url("libcurl's URL parser found no host in it")) }
        if hostBytes.first == UInt8(ascii: "["), curl_url_get(handle, CURLUPART_ZONEID, &zone, 0) == CURLUE_OUT_OF_MEMORY {
            throw .outOfMemory
        }
        do throws(InputError) {
            return try Validation.url(given: String(decoding: bytes, as: UTF8.self), https: https, host: hostBytes,
                                      zone: buffer(zone), port: buffer(port))
        } catch {
            throw .input(error)
        }
    }
}
