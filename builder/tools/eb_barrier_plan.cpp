// eb-barrier-plan: prints, for N = 2, 4, ..., 512 participants, the
// messages on the critical path of each barrier (barrier_critical_path),
// as BENCH lines: what decides between the barriers on a farm, where the
// measured latencies of a small machine (processes outnumbering cores)
// cannot.
#include <cstddef>
#include <iostream>

#include "schedule/barrier_plan.hpp"

int main() {
    for (const eb::Barrier_kind kind : {eb::Barrier_kind::centralized, eb::Barrier_kind::tournament})
        for (std::size_t participants = 2; participants <= 512; participants *= 2)
            std::cout << "BENCH name=barrier_critical_path_" << eb::barrier_name(kind) << "_n" << participants
                      << " value=" << eb::barrier_critical_path(kind, participants) << " unit=messages\n";
    return 0;
}
