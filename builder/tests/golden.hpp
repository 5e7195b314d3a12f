#pragma once

// Golden files shared with the operator: bodies the builder writes, which
// the operator's Go tests read (operator/internal/builderapi/testdata/
// builder/), so that a field or a message cannot change on one side
// unnoticed by the other.

#include <string>

namespace eb::test {

// Expects `text` to equal the golden file `name`. With EB_UPDATE_GOLDEN=1
// in the environment it writes the file instead (then run the operator's
// tests: go test ./internal/builderapi ./internal/builderclient).
void expect_golden(const std::string& name, const std::string& text);

}  // namespace eb::test
