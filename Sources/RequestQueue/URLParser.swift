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
    ///
    /// The thread's last URL accepted by libcurl is kept (`LastURL`): a URL with the same
    /// "scheme://authority" (the bytes up to the first "/", "?" or "#" after the "//", or to the
    /// end) is not parsed by libcurl again. libcurl 7.88 reads the scheme, host, port and zone from
    /// those bytes only (lib/urlapi.c, parseurl: the host ends at HOSTNAME_END); what follows (path,
    /// query, fragment) can only fail its check for control bytes and spaces (junkscan), which
    /// `Validation.urlSyntax` has already refused, or run out of memory. So such a URL is accepted
    /// with the same parts, as a parse would accept it.
    static func parse(_ url: UnsafePointer<CChar>, _ bytes: UnsafeBufferPointer<UInt8>) throws(Failure) -> ValidatedURL {
        let https: Bool, authority: Int
        if let common = Validation.commonURL(bytes) {
            (https, authority) = common
        } else {
            do throws(InputError) { https = try Validation.urlSyntax(bytes) } catch { throw .input(error) }
            authority = Validation.authorityEnd(bytes)
        }
        // Borrowed, not retained: the thread's own object, released only when the thread exits.
        let last = LastURL.currentReference
        if let known = last?._withUnsafeGuaranteedRef({ $0.url(bytes, authorityEnd: authority) }) { return known }
        let parsed = try parsedByLibcurl(url, bytes, https: https)
        last?._withUnsafeGuaranteedRef { $0.remember(bytes, authorityEnd: authority, parsed) }
        return parsed
    }

    private static func parsedByLibcurl(_ url: UnsafePointer<CChar>, _ bytes: UnsafeBufferPointer<UInt8>, https: Bool)
        throws(Failure) -> ValidatedURL {
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

/// The last URL a thread had parsed by libcurl: its "scheme://authority" bytes and the parts
/// libcurl read from them (see `URLParser.parse`). One per thread (a pthread key), so that adding
/// threads share no lock; freed when the thread exits.
final class LastURL {
    private var authority: [UInt8] = []
    private var parsed: ValidatedURL?
    /// How many URLs the thread had libcurl parse (accepted ones; for the tests).
    private(set) var parses = 0

    /// `url` with the remembered parts when its authority is the remembered one.
    func url(_ url: UnsafeBufferPointer<UInt8>, authorityEnd end: Int) -> ValidatedURL? {
        guard end == authority.count, let base = url.baseAddress,
              authority.withUnsafeBytes({ $0.baseAddress.map { memcmp($0, base, end) == 0 } ?? false }) else { return nil }
        return parsed?.with(string: String(decoding: url, as: UTF8.self))
    }

    func remember(_ url: UnsafeBufferPointer<UInt8>, authorityEnd end: Int, _ parts: ValidatedURL) {
        authority = Array(UnsafeBufferPointer(rebasing: url[..<end]))
        parsed = parts
        parses += 1
    }

    /// The calling thread's, made on first use; nil when the key or the memory is missing.
    static var current: LastURL? { currentReference?.takeUnretainedValue() }

    /// `current`, not retained (the thread's key holds it until the thread exits).
    static var currentReference: Unmanaged<LastURL>? {
        guard let key else { return nil }
        if let stored = pthread_getspecific(key) { return Unmanaged<LastURL>.fromOpaque(stored) }
        let made = Unmanaged.passRetained(LastURL())
        guard pthread_setspecific(key, made.toOpaque()) == 0 else {
            made.release()
            return nil
        }
        return made
    }

    private static let key: pthread_key_t? = {
        var key = pthread_key_t()
        let made = pthread_key_create(&key) { stored in
            if let stored { Unmanaged<LastURL>.fromOpaque(stored).release() }
        }
        return made == 0 ? key : nil
    }()
}
