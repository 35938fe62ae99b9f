-- Headless Neovim (Debian's 0.7) as a wavecast client: hover, code lens and
-- diagnostics after saving. Prints "PASS ..." lines; any failure exits with 1.
-- Environment: WAVECAST_BIN (the wavecast executable), WAVECAST_SAMPLE (a
-- writable copy of samples/small_cnn.py).
local out = io.stdout
local bin = assert(os.getenv("WAVECAST_BIN"), "WAVECAST_BIN is not set")
local sample = assert(os.getenv("WAVECAST_SAMPLE"), "WAVECAST_SAMPLE is not set")

local function fail(message)
  out:write("FAIL: " .. message .. "\n")
  out:flush()
  vim.cmd("cquit 1")
end

local function check(condition, message)
  if not condition then
    fail(message)
  end
  out:write("PASS " .. message .. "\n")
end

local function run()
  vim.cmd("edit " .. vim.fn.fnameescape(sample))
  local buf = vim.api.nvim_get_current_buf()
  local uri = vim.uri_from_bufnr(buf)
  local stderr = {}
  local client_id = vim.lsp.start_client({
    name = "wavecast",
    cmd = { bin, "serve", "--gpu", "H100,A100,T4", "--debounce-ms", "50" },
    root_dir = vim.fn.fnamemodify(sample, ":h"),
    init_options = { protocol_version = 2 },
    handlers = {
      ["window/logMessage"] = function(_, result)
        table.insert(stderr, result.message)
      end,
    },
  })
  check(client_id ~= nil, "the client started")
  vim.lsp.buf_attach_client(buf, client_id)
  check(vim.wait(10000, function()
    local client = vim.lsp.get_client_by_id(client_id)
    return client ~= nil and client.initialized
  end, 10), "the daemon initialized")

  vim.cmd("write") -- didSave starts the analysis
  local hover
  local ready = vim.wait(180000, function()
    local replies = vim.lsp.buf_request_sync(buf, "textDocument/hover", {
      textDocument = { uri = uri },
      position = { line = 21, character = 10 },
    }, 2000)
    for _, reply in pairs(replies or {}) do
      if reply.result and reply.result.contents then
        hover = reply.result.contents.value
      end
    end
    return hover ~= nil
  end, 250)
  check(ready, "hover on the first conv line answered after the save")
  check(hover:find("| GPU | forward | backward |", 1, true) ~= nil, "hover shows the per-GPU table")
  check(hover:find("aten::convolution", 1, true) ~= nil, "hover lists the line's ops")
  check(hover:find("| T4 |", 1, true) ~= nil, "hover has a T4 row")

  vim.lsp.codelens.refresh()
  local lenses = {}
  check(vim.wait(10000, function()
    lenses = vim.lsp.codelens.get(buf) or {}
    return #lenses > 0
  end, 50), "code lenses arrived")
  local iteration, perLine = 0, 0
  for _, lens in ipairs(lenses) do
    local title = lens.command and lens.command.title or ""
    if lens.range.start.line == 38 and title:find("/iter", 1, true) then
      iteration = iteration + 1
    end
    if lens.range.start.line == 21 and title:find("H100", 1, true) then
      perLine = perLine + 1
    end
  end
  check(iteration == 3, "one iteration lens per target GPU on wavecast_iteration")
  check(perLine == 1, "a per-line lens on the conv line (Neovim 0.7 shows no inlay hints)")

  -- Break the model provider: the exception becomes an error diagnostic on its line.
  vim.api.nvim_buf_set_lines(buf, 29, 30, false, { "    return SmallCNN(num_classes=1 // 0)" })
  vim.cmd("write")
  local found
  check(vim.wait(180000, function()
    for _, diagnostic in ipairs(vim.diagnostic.get(buf)) do
      if diagnostic.severity == vim.diagnostic.severity.ERROR then
        found = diagnostic
      end
    end
    return found ~= nil
  end, 100), "an error diagnostic arrived after the broken save")
  check(found.lnum == 29, "the diagnostic is on the failing line (got " .. tostring(found.lnum) .. ")")
  check(found.message:find("ZeroDivisionError", 1, true) ~= nil, "the diagnostic names the exception")

  vim.lsp.stop_client(client_id)
  vim.wait(2000, function()
    return vim.lsp.get_client_by_id(client_id) == nil
  end, 20)
  out:write("ALL PASSED\n")
  out:flush()
  vim.cmd("qa!")
end

local ok, err = pcall(run)
if not ok then
  fail(tostring(err))
end
