#include "transport/data_key.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace eb {

std::variant<Data_key, std::string> Data_key::load(const std::optional<std::string>& path, const char* environment) {
    std::string secret;
    std::string source;
    if (path) {
        std::ifstream file(*path, std::ios::binary);
        if (!file) return "--data-key-file " + *path + ": cannot be read; mount the run's data key there";
        std::ostringstream content;
        content << file.rdbuf();
        secret = content.str();
        source = "--data-key-file " + *path;
    } else if (environment != nullptr && *environment != '\0') {
        secret = environment;
        source = "EB_DATA_KEY";
    } else {
        return Data_key();
    }
    while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r' || secret.back() == ' '))
        secret.pop_back();
    if (secret.size() < min_bytes)
        return source + ": the data key has " + std::to_string(secret.size()) + " bytes; it needs at least " +
               std::to_string(min_bytes) + " (e.g. head -c 32 /dev/urandom | base64)";
    return Data_key(std::move(secret));
}

Data_key::Mac Data_key::prove(const Nonce& nonce, std::span<const std::byte> message) const {
    Mac mac{};
    if (!configured()) return mac;
    std::vector<unsigned char> input(nonce.size() + message.size());
    std::memcpy(input.data(), nonce.data(), nonce.size());
    if (!message.empty()) std::memcpy(input.data() + nonce.size(), message.data(), message.size());
    std::size_t length = 0;
    if (EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, secret_.data(), secret_.size(), input.data(),
                  input.size(), reinterpret_cast<unsigned char*>(mac.data()), mac.size(), &length) == nullptr ||
        length != mac.size())
        throw std::runtime_error("HMAC-SHA256 failed (OpenSSL)");
    return mac;
}

bool Data_key::verify(const Nonce& nonce, std::span<const std::byte> message, const Mac& mac) const {
    const Mac expected = prove(nonce, message);
    return CRYPTO_memcmp(expected.data(), mac.data(), mac.size()) == 0;
}

Data_key::Nonce Data_key::fresh_nonce() {
    Nonce nonce{};
    std::size_t filled = 0;
    while (filled < nonce.size()) {
        const ssize_t got = ::getrandom(nonce.data() + filled, nonce.size() - filled, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) throw std::system_error(errno, std::generic_category(), "getrandom");
        filled += static_cast<std::size_t>(got);
    }
    return nonce;
}

}  // namespace eb
