#include "lsp/transport.h"

#include <array>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <optional>

namespace wavecast::lsp {

namespace asio = boost::asio;
using protocol::FrameDecoder;
using protocol::FramingError;

namespace {

// Until a TCP client presents the token, its messages may be only as large as an
// initialize request needs: a stranger must not make the daemon buffer 64 MiB.
constexpr size_t kUnauthenticatedMaxContentLength = 64 * 1024;

// One client on a stream (or on an input/output pair of streams, for stdio).
template <class Stream>
class Connection : public ClientSink, public std::enable_shared_from_this<Connection<Stream>> {
public:
  Connection(asio::io_context& io, LanguageServer& server, Stream input,
             std::optional<Stream> output, std::function<void()> onClosed)
      : io_(io), server_(server), input_(std::move(input)), output_(std::move(output)),
        onClosed_(std::move(onClosed)) {}

  void start(bool needsToken) {
    if (needsToken) {
      protocol::FramingLimits limits;
      limits.maxContentLength = kUnauthenticatedMaxContentLength;
      decoder_.setLimits(limits);
    }
    id_ = server_.addClient(this->shared_from_this(), needsToken);
    read();
  }

  void authenticated() override { decoder_.setLimits({}); }

  // Dropped once the connection is closing: only what was queued before is written.
  void send(std::string body) override {
    if (closing_)
      return;
    queue_.push_back(protocol::encodeFrame(body));
    if (queue_.size() == 1)
      write();
  }

  // Deferred: the server may call this from inside receive().
  void close() override {
    closing_ = true;
    asio::post(io_, [self = this->shared_from_this()] {
      if (self->queue_.empty())
        self->finish();
    });
  }

private:
  Stream& output() { return output_ ? *output_ : input_; }

  void read() {
    input_.async_read_some(
        asio::buffer(buffer_),
        [self = this->shared_from_this()](const boost::system::error_code& error, size_t size) {
          if (self->closed_)
            return;
          if (error) {
            // End of input (or a broken stream): every request already received gets
            // its reply before the connection closes; a client that half-closes its
            // socket, or a stdio client that closes stdin, still reads them.
            if (auto truncated = self->decoder_.finish())
              self->server_.framingError(self->id_, truncated->message);
            self->server_.inputEnded(self->id_);
            self->closing_ = true;
            if (self->queue_.empty())
              self->finish();
            return;
          }
          self->decoder_.feed(std::string_view(self->buffer_.data(), size));
          while (!self->closing_) {
            auto frame = self->decoder_.next();
            if (!frame)
              break;
            if (auto* body = std::get_if<std::string>(&*frame))
              self->server_.receive(self->id_, *body);
            else
              self->server_.framingError(self->id_, std::get<FramingError>(*frame).message);
          }
          if (!self->closing_)
            self->read();
        });
  }

  void write() {
    asio::async_write(
        output(), asio::buffer(queue_.front()),
        [self = this->shared_from_this()](const boost::system::error_code& error, size_t) {
          if (error) {
            self->queue_.clear();
            self->finish();
            return;
          }
          self->queue_.pop_front();
          if (!self->queue_.empty())
            self->write();
          else if (self->closing_)
            self->finish();
        });
  }

  void finish() {
    if (closed_)
      return;
    closed_ = true;
    closing_ = true;
    server_.removeClient(id_);
    boost::system::error_code ignored;
    input_.close(ignored);
    if (output_)
      output_->close(ignored);
    if (onClosed_)
      onClosed_();
  }

  asio::io_context& io_;
  LanguageServer& server_;
  Stream input_;
  std::optional<Stream> output_;
  std::function<void()> onClosed_;
  ClientId id_ = 0;
  FrameDecoder decoder_;
  std::array<char, 64 * 1024> buffer_{};
  std::deque<std::string> queue_;
  bool closing_ = false;
  bool closed_ = false;
};

} // namespace

void startStreamClient(asio::io_context& io, LanguageServer& server, int inputFd, int outputFd,
                       std::function<void()> onClosed) {
  using Descriptor = asio::posix::stream_descriptor;
  auto connection = std::make_shared<Connection<Descriptor>>(
      io, server, Descriptor(io, inputFd), std::optional<Descriptor>(Descriptor(io, outputFd)),
      std::move(onClosed));
  connection->start(/*needsToken=*/false);
}

TcpListener::TcpListener(asio::io_context& io, LanguageServer& server,
                         const asio::ip::tcp::endpoint& endpoint)
    : server_(server), acceptor_(io, endpoint) {
  accept();
}

void TcpListener::close() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
}

void TcpListener::accept() {
  acceptor_.async_accept(
      [this](const boost::system::error_code& error, asio::ip::tcp::socket socket) {
        if (error == asio::error::operation_aborted)
          return;
        if (!error) {
          socket.set_option(asio::ip::tcp::no_delay(true));
          auto& io = static_cast<asio::io_context&>(acceptor_.get_executor().context());
          auto connection = std::make_shared<Connection<asio::ip::tcp::socket>>(
              io, server_, std::move(socket), std::nullopt, nullptr);
          connection->start(/*needsToken=*/true);
        }
        accept();
      });
}

} // namespace wavecast::lsp
