#pragma once
// How many threads libtorch uses. This libtorch starts with one intra-op
// thread here whatever the machine has, so the programs ask for the machine's
// cores unless the user chose (OMP_NUM_THREADS or KVSCOPE_THREADS set).
namespace kvscope {

// Sets libtorch's intra-op threads to KVSCOPE_THREADS, else leaves
// OMP_NUM_THREADS' choice, else uses every hardware thread. Returns the count.
int useMachineThreads();

}  // namespace kvscope
