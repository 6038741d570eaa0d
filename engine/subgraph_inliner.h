#ifndef NDSERVE_ENGINE_SUBGRAPH_INLINER_H_
#define NDSERVE_ENGINE_SUBGRAPH_INLINER_H_

// Control flow into the flat graph IR (docs/design.md §4). Internal to the loader: like
// onnx_convert.h, it names ONNX's protobuf types.
//
// If: the nodes of both branches join the graph with guards (NodeDef::guards) naming the
// condition and the branch, and the If is left as [cond, then outputs..., else
// outputs...] -> outputs, so the engine runs the taken branch's nodes and hands its
// values on.
//
// Loop: the body's nodes join the graph marked with their loop (NodeDef::loop), its
// inputs become names the engine sets per iteration (GraphDef::loops), and the Loop is
// left as [trip count, cond, initial values..., body outputs..., outer values the body
// reads...] -> outputs (graph.h LoopDef); the engine runs the body's nodes once per
// iteration from there. An absent trip count or condition becomes a constant (no limit,
// true).
//
// PyTorch's lists: a sequence that starts as SequenceEmpty, is carried through a Loop,
// is appended to once per iteration by a SequenceInsert and is read after the loop only
// by ConcatFromSequence is what ONNX calls a scan output, concatenated or stacked along
// ConcatFromSequence's axis; it is rewritten into one. Any other sequence is
// UNIMPLEMENTED naming its node.
//
// Names a subgraph defines get the prefix "<If>/then/", "<If>/else/" or "<Loop>/body/",
// so they cannot collide with the enclosing graph's or another subgraph's; names it does
// not define are the enclosing scopes' (ONNX's outer-scope references).

#include "absl/status/status.h"
#include "engine/graph.h"
#include "onnx/onnx_pb.h"

namespace ndserve::engine {

// Appends `graph`'s nodes (Constants as initializers) to `def`, inlining every If and
// Loop at any depth. Moves tensor bytes out of `graph`, and rewrites its list loops.
absl::Status InlineSubgraphs(onnx::GraphProto& graph, GraphDef* def);

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_SUBGRAPH_INLINER_H_
