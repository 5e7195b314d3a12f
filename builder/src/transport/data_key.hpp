#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <variant>

namespace eb {

// The run's secret for the data plane: every unit of a run holds the same
// one (the operator mounts it from a per-run Secret), and proves it on each
// data connection it dials by an HMAC-SHA256 over the acceptor's fresh nonce
// and its hello. A process without it cannot take a rank; a hello recorded
// on the wire is worthless on another connection.
class Data_key {
public:
    static constexpr std::size_t min_bytes = 16;
    static constexpr std::size_t nonce_bytes = 16;
    static constexpr std::size_t mac_bytes = 32;
    using Nonce = std::array<std::byte, nonce_bytes>;
    using Mac = std::array<std::byte, mac_bytes>;

    Data_key() = default;  // none: connections carry no proof and accept none
    explicit Data_key(std::string secret) : secret_(std::move(secret)) {}

    // From --data-key-file (its content, without trailing whitespace), else
    // the environment's EB_DATA_KEY, else none. An error names the source
    // and the fix: unreadable, or shorter than min_bytes.
    static std::variant<Data_key, std::string> load(const std::optional<std::string>& path,
                                                    const char* environment);

    bool configured() const { return !secret_.empty(); }
    // HMAC-SHA256(secret, nonce || message); all zero without a secret.
    Mac prove(const Nonce& nonce, std::span<const std::byte> message) const;
    // Whether `mac` is what prove() makes (constant time); without a secret,
    // only the all-zero proof is.
    bool verify(const Nonce& nonce, std::span<const std::byte> message, const Mac& mac) const;

    static Nonce fresh_nonce();

private:
    std::string secret_;
};

}  // namespace eb
