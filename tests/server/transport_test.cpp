#include "fake_analyzer.h"
#include "lsp/language_server.h"
#include "lsp/transport.h"
#include "wavecast/protocol/framing.h"
#include "wavecast/protocol/jsonrpc.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <gtest/gtest.h>
#include <thread>

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

} // namespace
} // namespace wavecast::lsp
