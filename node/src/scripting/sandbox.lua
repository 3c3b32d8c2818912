-- Runs once per Lua state, in the real global table, after the libraries are in place.
-- Argument: the hidden table through which each run hands `redis.call` its dispatcher.
-- Returns the environment scripts run in: a view of the globals that errors on reading an
-- undeclared name and refuses every write, as Redis 7.0's read-only global table does.
local hidden = ...
local G = _G
local rawget, rawset, error, type, tostring = rawget, rawset, error, type, tostring
local real_setmetatable, real_setfenv, real_getfenv = setmetatable, setfenv, getfenv
local real_loadstring = loadstring
local READONLY = "Attempt to modify a readonly table"

-- Tables scripts may not change, by identity (weak keys: views die with the state anyway).
local protected = real_setmetatable({}, {__mode = "k"})
local function refuse() error(READONLY, 2) end

-- What getmetatable returns for a protected table: itself read-only.
local function sealed_meta()
  local view = real_setmetatable({}, {__newindex = refuse, __metatable = false})
  protected[view] = true
  return view
end

local function readonly(t)
  local view = {}
  real_setmetatable(view, {__index = t, __newindex = refuse, __metatable = sealed_meta()})
  protected[view] = true
  return view
end

-- redis.call raises the command's error (a table {err=...}); redis.pcall returns it.
local redis = rawget(G, "redis")
-- The arguments travel as one table: thousands of them (unpack of a big table) would not
-- fit the stack a Rust callback reads its arguments from.
local select = select
redis.call = function(...)
  local reply, failed = hidden.dispatch({...}, select("#", ...))
  if failed then error(reply, 0) end
  return reply
end
redis.pcall = function(...)
  local reply = hidden.dispatch({...}, select("#", ...))
  return reply
end

-- No files, no output, no modules.
for _, name in ipairs({"loadfile", "dofile", "print", "module", "require"}) do
  rawset(G, name, nil)
end

local env = {}

rawset(G, "setmetatable", function(t, m)
  if protected[t] then error(READONLY, 2) end
  return real_setmetatable(t, m)
end)
rawset(G, "rawset", function(t, k, v)
  if protected[t] then error(READONLY, 2) end
  return rawset(t, k, v)
end)
rawset(G, "setfenv", function(f, t)
  if f == 0 then error(READONLY, 2) end
  if type(f) == "number" and f > 0 then f = f + 1 end
  return real_setfenv(f, t)
end)
rawset(G, "getfenv", function(f)
  if f == nil then f = 1 end
  if type(f) == "number" and f > 0 then f = f + 1 end
  local e = real_getfenv(f)
  if e == G then return env end
  return e
end)
-- Source only (a binary chunk could break the VM), run in the scripts' environment.
rawset(G, "loadstring", function(s, name)
  if type(s) == "string" and s:byte(1) == 27 then
    return nil, "binary chunks are not allowed"
  end
  local f, e = real_loadstring(s, name)
  if f then real_setfenv(f, env) end
  return f, e
end)

for _, name in ipairs({"redis", "cjson", "bit", "cmsgpack", "struct", "string", "math",
                       "table", "coroutine"}) do
  local lib = rawget(G, name)
  if type(lib) == "table" then rawset(G, name, readonly(lib)) end
end

real_setmetatable(env, {
  __index = function(_, k)
    local v = rawget(G, k)
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end,
  __newindex = refuse,
  __metatable = sealed_meta(),
})
protected[env] = true
rawset(G, "_G", env)
return env
