// Byte transports for the language server: LSP framing over stdio or TCP on
// Boost.Asio. They only move message bodies; LanguageServer interprets them.
#pragma once

#include "lsp/language_server.h"
#include "wavecast/protocol/framing.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <functional>
#include <memory>
#include <string>

namespace wavecast::lsp {

// Serves one client on the file descriptors `inputFd`/`outputFd` (taken over).
// `onClosed` runs once the client's stream ended or the client sent `exit`.
void startStreamClient(boost::asio::io_context& io, LanguageServer& server, int inputFd,
                       int outputFd, std::function<void()> onClosed);

// Accepts TCP clients; each must authenticate with the server's token.
class TcpListener {
public:
  TcpListener(boost::asio::io_context& io, LanguageServer& server,
              const boost::asio::ip::tcp::endpoint& endpoint);
  unsigned short port() const { return acceptor_.local_endpoint().port(); }
  void close();

private:
  void accept();

  LanguageServer& server_;
  boost::asio::ip::tcp::acceptor acceptor_;
};

} // namespace wavecast::lsp
