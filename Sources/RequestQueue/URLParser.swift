import CCurl
import Glibc
import RequestQueueCore

/// Request URLs are checked by libcurl's own URL parser (`curl_url`), with the flags CURLOPT_URL
/// uses, so that the host, port and credentials the library checks and counts (per-host limits)
/// are those libcurl sends to: one parser, not two that could disagree. The library's own rules
/// (`Validation.urlSyntax`: printable ASCII, http or https, "scheme://") come first; libcurl's
/// normalised URL is what the transfer is given.
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
        default: throw .input(.invalidURL)
        }
        /// One part as libcurl gives it; nil when it has none.
        func part(_ which: CURLUPart, _ flags: UInt32 = 0) throws(Failure) -> String? {
            var value: UnsafeMutablePointer<CChar>?
            let rc = curl_url_get(handle, which, &value, flags)
            defer { curl_free(value) }
            if rc == CURLUE_OUT_OF_MEMORY { throw .outOfMemory }
            guard rc == CURLUE_OK, let value else { return nil }
            if which == CURLUPART_URL, strlen(value) == bytes.count, memcmp(value, url, bytes.count) == 0 {
                return nil // the URL as given: no second copy
            }
            return String(cString: value)
        }
        let normalized = try part(CURLUPART_URL)
        guard let scheme = try part(CURLUPART_SCHEME), let host = try part(CURLUPART_HOST),
              let port = try part(CURLUPART_PORT, ccurl_url_default_port)
        else { throw .input(.invalidURL) }
        let zone = host.hasPrefix("[") ? try part(CURLUPART_ZONEID) : nil
        let given = String(decoding: bytes, as: UTF8.self)
        do throws(InputError) {
            return try Validation.url(given: given, normalized: normalized ?? given, https: https, scheme: scheme,
                                      host: host, zone: zone, port: port)
        } catch {
            throw .input(error)
        }
    }
}
