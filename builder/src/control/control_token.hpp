#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace eb {

// The bearer token that commands must present (docs/control-api.md). Without
// one, the control API is disabled: every command is refused with 403.
class Control_token {
public:
    Control_token() = default;  // none configured
    // `token` is used as given; load() trims and checks it.
    explicit Control_token(std::string token) : token_(std::move(token)) {}

    // From `token_file` (--token-file) when given: its content, surrounding
    // whitespace trimmed; an unreadable or empty file is an error naming the
    // path. Otherwise from `env_value`, the value of EB_CONTROL_TOKEN (null or
    // empty: no token). Passed in, so tests need not touch the environment.
    static std::variant<Control_token, std::string> load(const std::optional<std::string>& token_file,
                                                         const char* env_value);

    bool configured() const { return !token_.empty(); }
    // Whether `presented` is the token. The time taken depends on the length
    // of `presented` only, not on where it differs from the token.
    bool matches(std::string_view presented) const;

private:
    std::string token_;
};

// The token of an Authorization header value "Bearer <token>" (the scheme in
// any case); nullopt for another scheme or no token.
std::optional<std::string_view> bearer_token(std::string_view authorization);

}  // namespace eb
