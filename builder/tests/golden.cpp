#include "golden.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace eb::test {

void expect_golden(const std::string& name, const std::string& text) {
    const std::string path = std::string(EB_GOLDEN_DIR) + "/" + name;
    const char* update = std::getenv("EB_UPDATE_GOLDEN");
    if (update != nullptr && std::string(update) == "1") {
        std::ofstream(path, std::ios::binary) << text;
        return;
    }
    std::ifstream file(path, std::ios::binary);
    ASSERT_TRUE(file) << "no golden file " << path << "; write it with EB_UPDATE_GOLDEN=1";
    std::ostringstream golden;
    golden << file.rdbuf();
    EXPECT_EQ(text, golden.str()) << "the builder now writes another " << name
                                  << ": if that is meant, rewrite it with EB_UPDATE_GOLDEN=1 ctest -R Golden, and "
                                     "make the operator read it (go test ./internal/builderapi "
                                     "./internal/builderclient in operator/)";
}

}  // namespace eb::test
