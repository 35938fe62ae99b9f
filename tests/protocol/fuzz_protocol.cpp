// libFuzzer target: LSP framing and message decoding must never crash, hang
// or leak on any input, and every decoded message must survive a re-encode.
#include "wavecast/protocol/framing.h"
#include "wavecast/protocol/jsonrpc.h"
#include "wavecast/protocol/lsp.h"
#include "wavecast/protocol/wavecast.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

using namespace wavecast::protocol;

namespace {

template <typename Decode> void tryDecode(Decode decode) {
  try {
    decode();
  } catch (const RpcError&) {
    // Invalid params are expected; anything else escaping is a bug the fuzzer reports.
  }
}

void decodeTyped(const std::string& method, const Json& params) {
  tryDecode([&] { positionParamsFromJson(params); });
  tryDecode([&] { inlayHintParamsFromJson(params); });
  tryDecode([&] { didOpenFromJson(params); });
  tryDecode([&] {
    std::string text = "line one\n\xf0\x9f\x98\x80 two\n";
    for (const auto& change : didChangeFromJson(params).contentChanges)
      applyChange(text, change);
  });
  tryDecode([&] { didSaveFromJson(params); });
  tryDecode([&] {
    auto init = initializeFromJson(params);
    initializationOptionsFromJson(init.initializationOptions);
  });
  tryDecode([&] { workspaceFoldersChangeFromJson(params); });
  tryDecode([&] { setTargetsFromJson(params); });
  tryDecode([&] { setBatchSizeFromJson(params); });
  tryDecode([&] { analyzeFromJson(params); });
  tryDecode([&] {
    Settings settings;
    mergeSettings(settings, params, "params");
  });
  uriToPath(method);
}

void decodeBody(std::string_view body) {
  auto decoded = decodeMessage(body);
  auto* message = std::get_if<Message>(&decoded);
  if (!message)
    return;
  if (auto* request = std::get_if<Request>(message))
    decodeTyped(request->method, request->params);
  else if (auto* notification = std::get_if<Notification>(message))
    decodeTyped(notification->method, notification->params);
  std::string encoded = encodeMessage(*message);
  if (!std::holds_alternative<Message>(decodeMessage(encoded)))
    std::abort(); // what we send must be what we accept
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  FrameDecoder decoder(FramingLimits{256, 4096});
  size_t split = size ? data[0] % (size + 1) : 0;
  for (std::string_view part : {input.substr(0, split), input.substr(split)}) {
    decoder.feed(part);
    while (auto frame = decoder.next())
      if (auto* body = std::get_if<std::string>(&*frame))
        decodeBody(*body);
  }
  decoder.finish();
  decodeBody(input);
  return 0;
}
