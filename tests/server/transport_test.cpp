#include "fake_analyzer.h"
#include "lsp/language_server.h"
#include "lsp/transport.h"
#include "wavecast/protocol/framing.h"
#include "wavecast/protocol/jsonrpc.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <thread>
#include <unistd.h>

namespace wavecast::lsp {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

// A daemon listening on a loopback port, served on its own thread.
class TcpDaemon {
public:
  TcpDaemon() {
    ServerOptions options;
    options.version = "test";
    options.token = "secret";
    options.tokenSource = "the test";
    server_ = std::make_unique<LanguageServer>(io_, analyzer_, options);
    listener_ = std::make_unique<TcpListener>(
        io_, *server_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    thread_ = std::thread([this] { io_.run(); });
  }
  ~TcpDaemon() {
    asio::post(io_, [this] { listener_->close(); });
    io_.stop();
    thread_.join();
  }
  unsigned short port() const { return listener_->port(); }

private:
  asio::io_context io_;
  testing::FakeAnalyzer analyzer_;
  std::unique_ptr<LanguageServer> server_;
  std::unique_ptr<TcpListener> listener_;
  std::thread thread_;
};

// Everything the daemon sends until it closes the connection.
std::string readUntilClosed(tcp::socket& socket) {
  std::string received;
  boost::system::error_code error;
  std::array<char, 4096> buffer{};
  while (!error) {
    const size_t n = socket.read_some(asio::buffer(buffer), error);
    received.append(buffer.data(), n);
  }
  return received;
}

TEST(TcpTransport, AStrangerCannotSendALargeMessage) {
  TcpDaemon daemon;
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), daemon.port()));
  // Announces 1 MiB without having authenticated: refused and disconnected
  // before the daemon buffers the body.
  const std::string header = "Content-Length: 1048576\r\n\r\n";
  asio::write(socket, asio::buffer(header + std::string(1000, ' ')));
  const std::string reply = readUntilClosed(socket);
  EXPECT_NE(reply.find("exceeds the limit of 65536 bytes"), std::string::npos) << reply;
}

TEST(TcpTransport, AnAuthenticatedClientMaySendLargeMessages) {
  TcpDaemon daemon;
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), daemon.port()));
  auto exchange = [&](int id, const std::string& method, const Json& params) {
    asio::write(socket,
                asio::buffer(protocol::encodeFrame(protocol::encodeRequest(id, method, params))));
    protocol::FrameDecoder decoder;
    std::array<char, 4096> buffer{};
    while (true) {
      if (auto frame = decoder.next()) {
        const Json message = Json::parse(std::get<std::string>(*frame));
        if (message.value("id", Json()) == id)
          return message;
        continue;
      }
      decoder.feed(std::string_view(buffer.data(), socket.read_some(asio::buffer(buffer))));
    }
  };
  Json init = exchange(
      1, "initialize",
      {{"capabilities", Json::object()}, {"initializationOptions", {{"token", "secret"}}}});
  ASSERT_TRUE(init.contains("result")) << init.dump();
  // 200 KiB of parameters: over the stranger's limit, well under the client's.
  Json reply = exchange(2, "wavecast/listGpus", {{"padding", std::string(200 * 1024, 'x')}});
  EXPECT_TRUE(reply.contains("result")) << reply.dump().substr(0, 300);
}

// Requests written right before the client closes its end of stdin are all
// answered before the daemon's stdio connection closes: those served from the
// results at once, and a wavecast/analyze that waits on an analysis with
// RequestCancelled.
TEST(StreamTransport, RequestsBeforeEndOfInputAreAllAnswered) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("wavecast-eof-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string script = fs::canonical(dir).string() + "/train.py";
  std::ofstream(script) << "def wavecast_model():\n    pass\n"
                           "def wavecast_input(batch_size=32):\n    pass\n"
                           "def wavecast_iteration(model):\n    pass\n";
  const std::string uri = protocol::pathToUri(script);

  int toServer[2];
  int fromServer[2];
  ASSERT_EQ(::pipe(toServer), 0);
  ASSERT_EQ(::pipe(fromServer), 0);
  asio::io_context io;
  testing::FakeAnalyzer analyzer; // its analyses wait until released: never, here
  ServerOptions options;
  options.version = "test";
  bool closed = false;
  {
    LanguageServer server(io, analyzer, options);
    startStreamClient(io, server, toServer[0], fromServer[1], [&] {
      closed = true;
      io.stop();
    });

    std::string requests;
    const auto request = [&](int id, const std::string& method, const Json& params) {
      requests += protocol::encodeFrame(protocol::encodeRequest(id, method, params));
    };
    request(1, "initialize", {{"capabilities", Json::object()}});
    request(2, "wavecast/analyze", {{"uri", uri}});
    request(3, "wavecast/results", {{"uri", uri}});
    request(4, "wavecast/listGpus", Json::object());
    request(5, "textDocument/hover",
            {{"textDocument", {{"uri", uri}}}, {"position", {{"line", 0}, {"character", 0}}}});
    ASSERT_EQ(::write(toServer[1], requests.data(), requests.size()),
              static_cast<ssize_t>(requests.size()));
    ::close(toServer[1]); // end of input right behind the requests

    std::thread daemon([&] { io.run(); });
    std::string received;
    std::array<char, 4096> buffer{};
    for (ssize_t n; (n = ::read(fromServer[0], buffer.data(), buffer.size())) > 0;)
      received.append(buffer.data(), static_cast<size_t>(n));
    daemon.join();
    ::close(fromServer[0]);
    EXPECT_TRUE(closed);

    std::map<int, Json> replies;
    protocol::FrameDecoder decoder;
    decoder.feed(received);
    while (auto frame = decoder.next()) {
      const Json message = Json::parse(std::get<std::string>(*frame));
      if (message.contains("id") && message["id"].is_number() && !message.contains("method"))
        replies[message["id"].get<int>()] = message;
    }
    ASSERT_EQ(replies.size(), 5u) << received;
    EXPECT_TRUE(replies[1].contains("result")) << replies[1].dump();
    EXPECT_EQ(replies[2]["error"]["code"], -32800) << replies[2].dump();
    EXPECT_NE(replies[2]["error"]["message"].get<std::string>().find("input ended"),
              std::string::npos)
        << replies[2].dump();
    EXPECT_EQ(replies[3]["result"]["state"], "analyzing") << replies[3].dump();
    EXPECT_EQ(replies[4]["result"]["gpus"].size(), 2u) << replies[4].dump();
    EXPECT_TRUE(replies[5].contains("result")) << replies[5].dump();
  }
  fs::remove_all(dir);
}

} // namespace
} // namespace wavecast::lsp
