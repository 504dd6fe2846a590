#include "core/cache/kv_cache.h"

#include <algorithm>
#include <string>

#include "core/cache/block_pool.h"
#include "core/cache/block_table.h"
#include "core/error.h"

namespace kvscope {

namespace {

const BlockPool& checkedPool(const std::shared_ptr<BlockPool>& pool) {
  require(pool != nullptr, "KvCache: a paged cache needs a block pool");
  return *pool;
}

}  // namespace

KvCache::KvCache(int64_t num_layers, int64_t kv_heads, int64_t head_dim, c10::TensorOptions storage,
                 int64_t initial_capacity)
    : kv_heads_(kv_heads), head_dim_(head_dim), storage_(storage) {
  require(num_layers > 0 && kv_heads > 0 && head_dim > 0, "KvCache: layers, heads and head_dim must be positive");
  layers_.resize(num_layers);
  for (Layer& layer : layers_) {
    layer.k = torch::zeros({kv_heads, std::max<int64_t>(initial_capacity, 1), head_dim}, storage_);
    layer.v = torch::zeros_like(layer.k);
  }
}

KvCache::KvCache(std::shared_ptr<BlockPool> pool, int64_t sequence)
    : kv_heads_(checkedPool(pool).shape().kv_heads),
      head_dim_(pool->shape().head_dim),
      storage_(pool->storage()),
      layers_(pool->shape().num_layers),
      paged_(std::make_shared<BlockTable>(pool, sequence)) {}

void KvCache::refuseIfPaged(const char* feature) const {
  if (paged_) throw Error(std::string("KvCache: ") + feature + " is not supported by the paged cache layout yet");
}

int64_t KvCache::longestLength() const {
  int64_t longest = 0;
  for (const Layer& layer : layers_) longest = std::max(longest, layer.length);
  return longest;
}

const KvCache::Layer& KvCache::layerAt(int64_t layer) const {
  if (layer < 0 || layer >= numLayers()) {
    throw Error("KvCache: layer " + std::to_string(layer) + " out of range (" + std::to_string(numLayers()) + " layers)");
  }
  return layers_[layer];
}

int64_t KvCache::length(int64_t layer) const { return layerAt(layer).length; }

int64_t KvCache::capacity(int64_t layer) const {
  const Layer& l = layerAt(layer);
  return paged_ ? paged_->mappedRows() : l.k.size(1);
}

int64_t KvCache::firstPosition(int64_t layer) const { return layerAt(layer).first_position - pad_rows_; }

int64_t KvCache::endPosition(int64_t layer) const {
  const Layer& l = layerAt(layer);
  return l.first_position + l.compacted_away + l.length - pad_rows_;
}

void KvCache::setPadRows(int64_t rows) {
  for (int64_t l = 0; l < numLayers(); ++l) {
    require(rows >= 0 && rows <= length(l), "KvCache::setPadRows: " + std::to_string(rows) + " pad rows, but layer " +
                                                std::to_string(l) + " holds " + std::to_string(length(l)) + " rows");
  }
  pad_rows_ = rows;
}

bool KvCache::uniformLength() const {
  return std::all_of(layers_.begin(), layers_.end(),
                     [&](const Layer& l) { return l.length == layers_.front().length; });
}

void KvCache::ensureCapacity(Layer& layer, int64_t needed) {
  const int64_t capacity = layer.k.size(1);
  if (needed <= capacity) return;
  // Geometric growth: amortised O(1) per appended row.
  reallocate(layer, std::max(needed, 2 * capacity));
}

void KvCache::reallocate(Layer& layer, int64_t capacity) {
  auto k = torch::zeros({kv_heads_, capacity, head_dim_}, storage_);  // [kv_heads, capacity, head_dim]
  auto v = torch::zeros_like(k);
  k.narrow(1, 0, layer.length).copy_(layer.k.narrow(1, 0, layer.length));
  v.narrow(1, 0, layer.length).copy_(layer.v.narrow(1, 0, layer.length));
  layer.k = k;
  layer.v = v;
  if (layer.keep.defined()) growKeepMask(layer, capacity);
  if (layer.positions.defined()) {
    auto positions = torch::zeros({kv_heads_, capacity}, torch::kInt64);  // [kv_heads, capacity]
    positions.narrow(1, 0, layer.length).copy_(layer.positions.narrow(1, 0, layer.length));
    layer.positions = positions;
  }
}

void KvCache::growKeepMask(Layer& layer, int64_t capacity) {
  // Rows past the length are marked kept: the next append writes them.
  auto keep = torch::ones({layer.k.size(0), capacity}, layer.k.options().dtype(torch::kBool));  // [kv_heads, capacity]
  if (layer.keep.defined()) keep.narrow(1, 0, layer.length).copy_(layer.keep.narrow(1, 0, layer.length));
  layer.keep = keep;
}

void KvCache::append(int64_t layer_index, const at::Tensor& k, const at::Tensor& v) {
  layerAt(layer_index);
  Layer& layer = layers_[layer_index];
  require(k.dim() == 3 && k.size(0) == kv_heads_ && k.size(2) == head_dim_ && v.sizes() == k.sizes(), [&] {
    return "KvCache::append: expected k and v of shape [" + std::to_string(kv_heads_) + ", n, " +
           std::to_string(head_dim_) + "]";
  });
  at::Tensor k_written = k, v_written = v;  // [kv_heads, n, head_dim]
  if (write_order_) {
    for (int64_t i : *write_order_) require(i >= 0 && i < k.size(1), "KvCache::append: write order out of range");
    const auto order = torch::tensor(*write_order_, torch::kInt64);
    k_written = k.index_select(1, order);
    v_written = v.index_select(1, order);
  }
  const int64_t n = k_written.size(1);
  if (paged_) {  // no keep mask nor positions: the paged layout refuses both
    paged_->write(layer_index, layer.length, k_written, v_written);
    layer.length += n;
    return;
  }
  ensureCapacity(layer, layer.length + n);
  layer.k.narrow(1, layer.length, n).copy_(k_written);
  layer.v.narrow(1, layer.length, n).copy_(v_written);
  advanceWritten(layer_index, n);
}

void KvCache::advanceWritten(int64_t layer_index, int64_t n) {
  Layer& layer = layers_[layer_index];
  if (layer.keep.defined()) layer.keep.narrow(1, layer.length, n).fill_(true);
  if (layer.positions.defined()) {  // appended after a compaction: contiguous from the end position
    const int64_t end = endPosition(layer_index);
    layer.positions.narrow(1, layer.length, n).copy_(torch::arange(end, end + n, torch::kInt64).unsqueeze(0));
  }
  layer.length += n;
}

bool KvCache::plainAppendApplies() const {
  return !paged_ && !write_order_ && storage_.dtype() == caffe2::TypeMeta::Make<float>();
}

KvCache::PlainLayer KvCache::appendPlain(int64_t layer_index, int64_t n) {
  layerAt(layer_index);
  require(plainAppendApplies() && n >= 0, "KvCache::appendPlain: needs float32 contiguous storage and no write order");
  Layer& layer = layers_[layer_index];
  ensureCapacity(layer, layer.length + n);
  require(layer.k.stride(2) == 1 && layer.v.strides() == layer.k.strides() && (!layer.keep.defined() || layer.keep.stride(1) == 1),
          "KvCache::appendPlain: the layer's storage is not laid out [kv_heads, capacity, head_dim]");
  advanceWritten(layer_index, n);
  PlainLayer plain;
  plain.k = layer.k.data_ptr<float>();  // [kv_heads, capacity, head_dim], contiguous as allocated
  plain.v = layer.v.data_ptr<float>();
  plain.head_stride = layer.k.stride(0);
  plain.row_stride = layer.k.stride(1);
  plain.length = layer.length;
  if (layer.keep.defined()) {
    plain.keep = layer.keep.data_ptr<bool>();  // [kv_heads, capacity]
    plain.keep_stride = layer.keep.stride(0);
  }
  return plain;
}

std::pair<at::Tensor, at::Tensor> KvCache::copyRows(const std::vector<int64_t>& first, int64_t n) const {
  require(plainAppendApplies() && static_cast<int64_t>(first.size()) == numLayers() && n >= 0,
          "KvCache::copyRows: needs float32 contiguous storage and a first row per layer");
  const int64_t kv_heads = layers_.empty() ? 0 : layers_.front().k.size(0);
  const int64_t head_dim = layers_.empty() ? 0 : layers_.front().k.size(2);
  auto k = torch::empty({numLayers(), kv_heads, n, head_dim}, torch::kFloat32);  // [layers, kv_heads, n, head_dim]
  auto v = torch::empty({numLayers(), kv_heads, n, head_dim}, torch::kFloat32);
  float* k_out = k.data_ptr<float>();
  float* v_out = v.data_ptr<float>();
  for (int64_t l = 0; l < numLayers(); ++l) {
    const Layer& layer = layers_[static_cast<size_t>(l)];
    const int64_t row = first[static_cast<size_t>(l)];
    require(row >= 0 && row + n <= layer.length && layer.k.size(0) == kv_heads && layer.k.size(2) == head_dim &&
                layer.k.stride(2) == 1 && layer.k.stride(1) == head_dim && layer.v.strides() == layer.k.strides(),
            [&] {
              return "KvCache::copyRows: rows " + std::to_string(row) + ".." + std::to_string(row + n) + " of layer " +
                     std::to_string(l) + " are not stored plainly";
            });
    const float* k_in = layer.k.data_ptr<float>();
    const float* v_in = layer.v.data_ptr<float>();
    for (int64_t h = 0; h < kv_heads; ++h) {
      const int64_t from = h * layer.k.stride(0) + row * head_dim, to = ((l * kv_heads) + h) * n * head_dim;
      std::copy_n(k_in + from, n * head_dim, k_out + to);
      std::copy_n(v_in + from, n * head_dim, v_out + to);
    }
  }
  return {k, v};
}

at::Tensor KvCache::keys(int64_t layer) const {
  const Layer& l = layerAt(layer);
  if (paged_) return paged_->gatherKeys(layer, l.length);
  return l.k.narrow(1, 0, l.length);
}

at::Tensor KvCache::values(int64_t layer) const {
  const Layer& l = layerAt(layer);
  if (paged_) return paged_->gatherValues(layer, l.length);
  return l.v.narrow(1, 0, l.length);
}

void KvCache::cropLayer(int64_t layer_index, int64_t new_length) {
  layerAt(layer_index);
  Layer& layer = layers_[layer_index];
  if (new_length < 0 || new_length > layer.length) {
    throw Error("KvCache::crop: cannot crop layer " + std::to_string(layer_index) + " of length " +
                std::to_string(layer.length) + " to " + std::to_string(new_length));
  }
  if (new_length < layer.gathered) {
    throw Error("KvCache::crop: layer " + std::to_string(layer_index) + " was compacted to " +
                std::to_string(layer.gathered) + " rows whose positions differ per kv head; cannot crop it to " +
                std::to_string(new_length) + " rows");
  }
  if (paged_) {
    if (paged_->keepLengthOnRollback()) return;  // the fault: the rows stay, and so do their blocks
    layer.length = new_length;
    paged_->keepRows(longestLength());
    return;
  }
  layer.length = new_length;
}

void KvCache::cropToPosition(int64_t end_position) {
  for (int64_t l = 0; l < numLayers(); ++l) {
    const int64_t surplus = endPosition(l) - end_position;  // rows appended at positions >= end_position
    if (surplus < 0) {
      throw Error("KvCache::cropToPosition: layer " + std::to_string(l) + " holds positions up to " +
                  std::to_string(endPosition(l)) + ", cannot keep positions up to " + std::to_string(end_position));
    }
    cropLayer(l, length(l) - surplus);
  }
}

void KvCache::crop(int64_t new_length) {
  for (int64_t l = 0; l < numLayers(); ++l) cropLayer(l, new_length);
  pad_rows_ = std::min(pad_rows_, std::max<int64_t>(new_length, 0));  // pad rows cut away are no longer there
}

void KvCache::clear() {
  pad_rows_ = 0;
  for (Layer& layer : layers_) {
    layer.length = 0;
    layer.first_position = 0;
    layer.compacted_away = 0;
    layer.gathered = 0;
    layer.keep = at::Tensor();
    layer.positions = at::Tensor();
  }
  if (paged_) paged_->clear();
}

KvCache KvCache::clone() const {
  KvCache copy = *this;  // shares the tensors; each is replaced by its own copy below
  if (paged_) {
    const BlockPool& pool = *paged_->pool();
    const int64_t blocks = std::max<int64_t>(static_cast<int64_t>(paged_->blocks().size()), 1);
    auto own_pool = std::make_shared<BlockPool>(pool.shape(), pool.storage(), blocks);
    std::vector<int64_t> rows;
    for (const Layer& layer : layers_) rows.push_back(layer.length);
    copy.paged_ = paged_->copyTo(own_pool, paged_->sequence(), rows);
    return copy;
  }
  for (Layer& layer : copy.layers_) {
    layer.k = layer.k.clone();
    layer.v = layer.v.clone();
    if (layer.keep.defined()) layer.keep = layer.keep.clone();
    if (layer.positions.defined()) layer.positions = layer.positions.clone();
  }
  return copy;
}

void KvCache::evictFront(int64_t layer_index, int64_t count) {
  layerAt(layer_index);
  Layer& layer = layers_[layer_index];
  if (count < 0 || count > layer.length) {
    throw Error("KvCache::evictFront: cannot evict " + std::to_string(count) + " rows from layer " +
                std::to_string(layer_index) + " of length " + std::to_string(layer.length));
  }
  if (count == 0) return;
  refuseIfPaged("evictFront (dropping a sliding window's oldest rows)");
  require(!layer.positions.defined(), "KvCache::evictFront: layer " + std::to_string(layer_index) +
                                          " was compacted; dropping rows from its front is not supported");
  const int64_t kept = layer.length - count;
  // Source and destination overlap when kept > count; copy through a temporary.
  if (kept > 0) {
    layer.k.narrow(1, 0, kept).copy_(layer.k.narrow(1, count, kept).clone());
    layer.v.narrow(1, 0, kept).copy_(layer.v.narrow(1, count, kept).clone());
    if (layer.keep.defined()) layer.keep.narrow(1, 0, kept).copy_(layer.keep.narrow(1, count, kept).clone());
  }
  layer.length = kept;
  layer.first_position += count;
}

int64_t KvCache::evictBefore(int64_t layer, int64_t position) {
  const int64_t count = std::clamp<int64_t>(position - firstPosition(layer), 0, length(layer));
  evictFront(layer, count);
  return count;
}

at::Tensor KvCache::keepMask(int64_t layer) const {
  const Layer& l = layerAt(layer);
  return l.keep.defined() ? l.keep.narrow(1, 0, l.length) : at::Tensor();
}

void KvCache::evictRows(int64_t layer_index, const at::Tensor& keep) {
  layerAt(layer_index);
  refuseIfPaged("evictRows (an eviction policy's keep mask)");
  Layer& layer = layers_[layer_index];
  require(keep.dim() == 2 && keep.size(0) == kv_heads_ && keep.size(1) == layer.length &&
              keep.scalar_type() == torch::kBool,
          "KvCache::evictRows: expected a bool keep mask of shape [" + std::to_string(kv_heads_) + ", " +
              std::to_string(layer.length) + "] for layer " + std::to_string(layer_index));
  if (!layer.keep.defined()) growKeepMask(layer, layer.k.size(1));
  auto current = layer.keep.narrow(1, 0, layer.length);  // [kv_heads, length]
  current.logical_and_(keep);
}

int64_t KvCache::keptRows(int64_t layer, int64_t kv_head) const {
  const Layer& l = layerAt(layer);
  require(kv_head >= 0 && kv_head < kv_heads_, "KvCache: kv head " + std::to_string(kv_head) + " out of range (" +
                                                   std::to_string(kv_heads_) + " kv heads)");
  if (!l.keep.defined()) return l.length;
  return l.keep[kv_head].narrow(0, 0, l.length).sum().item<int64_t>();
}

void KvCache::compact(int64_t layer_index) {
  layerAt(layer_index);
  refuseIfPaged("compact (gathering kept rows)");
  Layer& layer = layers_[layer_index];
  if (!layer.keep.defined()) return;
  const auto keep = layer.keep.narrow(1, 0, layer.length);  // [kv, T] bool
  const auto counts = keep.sum(1);                           // [kv]
  const int64_t kept = counts[0].item<int64_t>();
  if (!counts.eq(kept).all().item<bool>()) {
    std::string listed;
    for (int64_t h = 0; h < kv_heads_; ++h) listed += (h > 0 ? ", " : "") + std::to_string(counts[h].item<int64_t>());
    throw Error("KvCache::compact: the kv heads of layer " + std::to_string(layer_index) +
                " keep different numbers of rows (" + listed + "); a compacted layer needs one count per layer");
  }
  // nonzero() lists (head, row) pairs head by head, rows ascending: each
  // head's kept rows in position order.
  const auto rows = keep.nonzero().select(1, 1).reshape({kv_heads_, kept});                      // [kv, kept]
  const auto by_row = rows.unsqueeze(2).expand({kv_heads_, kept, head_dim_});                    // [kv, kept, D]
  const auto k = layer.k.narrow(1, 0, layer.length).gather(1, by_row);                            // [kv, kept, D]
  const auto v = layer.v.narrow(1, 0, layer.length).gather(1, by_row);                            // [kv, kept, D]
  const auto positions = rowPositions(layer_index).gather(1, rows);                               // [kv, kept]
  // Fresh storage with the kept rows and the same room for appends: the
  // removed rows' memory is freed, not just skipped.
  const int64_t capacity = std::max<int64_t>(kept + layer.k.size(1) - layer.length, 1);
  layer.compacted_away += layer.length - kept;
  layer.length = 0;
  layer.keep = at::Tensor();
  layer.positions = at::Tensor();
  reallocate(layer, capacity);
  layer.positions = torch::zeros({kv_heads_, capacity}, torch::kInt64);  // [kv, capacity]
  layer.k.narrow(1, 0, kept).copy_(k);
  layer.v.narrow(1, 0, kept).copy_(v);
  layer.positions.narrow(1, 0, kept).copy_(positions);
  layer.length = kept;
  layer.gathered = kept;
}

bool KvCache::compacted(int64_t layer) const { return layerAt(layer).positions.defined(); }

at::Tensor KvCache::rowPositions(int64_t layer) const {
  const Layer& l = layerAt(layer);
  if (l.positions.defined()) return l.positions.narrow(1, 0, l.length);
  return torch::arange(firstPosition(layer), firstPosition(layer) + l.length, torch::kInt64)
      .unsqueeze(0)
      .expand({kv_heads_, l.length});  // [kv, T]
}

void KvCache::renumberRows(int64_t layer_index, int64_t first_position) {
  layerAt(layer_index);
  refuseIfPaged("renumberRows (re-rotated keys)");
  require(first_position >= 0, "KvCache::renumberRows: the first position must be >= 0");
  Layer& layer = layers_[layer_index];
  layer.positions = at::Tensor();
  layer.first_position = first_position;
  layer.compacted_away = 0;
  layer.gathered = 0;
}

}  // namespace kvscope
