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
redis.acl_check_cmd = function(...)
  return hidden.acl_check({...}, select("#", ...))
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

-- Functions (FUNCTION LOAD). A library's code runs once with only the load API in sight
-- (`redis.register_function`, `redis.log`, the version); the functions it registers later run
-- with every global scripts have. Both through one environment, switched by
-- `hidden.loading`: a function keeps the environment of the chunk that made it.
local pairs, select, string_find, string_lower = pairs, select, string.find, string.lower
local FLAGS = {["no-writes"] = 1, ["allow-oom"] = 2, ["allow-stale"] = 4, ["no-cluster"] = 8,
               ["allow-cross-slot-keys"] = 16}
local function missing(k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 3)
end
local function fail(message) error({err = "ERR " .. message}, 0) end
local function text(v) return type(v) == "string" or type(v) == "number" end

local function register_function(...)
  local registered = hidden.registered
  if not hidden.loading or registered == nil then
    fail("redis.register_function can only be called on FUNCTION LOAD command")
  end
  local argc = select("#", ...)
  if argc < 1 or argc > 2 then fail("wrong number of arguments to redis.register_function") end
  local name, callback, description, flags = nil, nil, nil, 0
  if argc == 1 then
    local args = ...
    if type(args) ~= "table" then
      fail("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).")
    end
    for k, v in pairs(args) do
      if not text(k) then fail("named argument key given to redis.register_function is not a string") end
      local key = string_lower(tostring(k))
      if key == "function_name" then
        if not text(v) then fail("function_name argument given to redis.register_function must be a string") end
        name = tostring(v)
      elseif key == "description" then
        if not text(v) then fail("description argument given to redis.register_function must be a string") end
        description = tostring(v)
      elseif key == "callback" then
        if type(v) ~= "function" then fail("callback argument given to redis.register_function must be a function") end
        callback = v
      elseif key == "flags" then
        if type(v) ~= "table" then fail("flags argument to redis.register_function must be a table representing function flags") end
        for _, f in pairs(v) do
          local bit = type(f) == "string" and FLAGS[f]
          if not bit then fail("unknown flag given") end
          if flags % (2 * bit) < bit then flags = flags + bit end
        end
      else
        fail("unknown argument given to redis.register_function")
      end
    end
    if name == nil then fail("redis.register_function must get a function name argument") end
    if callback == nil then fail("redis.register_function must get a callback argument") end
  else
    name, callback = ...
    if not text(name) then fail("first argument to redis.register_function must be a string") end
    if type(callback) ~= "function" then fail("second argument to redis.register_function must be a function") end
    name = tostring(name)
  end
  if not string_find(name, "^[%w_]+$") then
    fail("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long")
  end
  local lower = string_lower(name)
  for i = 1, #registered do
    if string_lower(registered[i].name) == lower then fail("Function already exists in the library") end
  end
  registered[#registered + 1] = {name = name, callback = callback, description = description,
                                 flags = flags}
end

local full_redis = rawget(G, "redis")
local load_redis_fields = {register_function = register_function, log = full_redis.log,
  LOG_DEBUG = full_redis.LOG_DEBUG, LOG_VERBOSE = full_redis.LOG_VERBOSE,
  LOG_NOTICE = full_redis.LOG_NOTICE, LOG_WARNING = full_redis.LOG_WARNING,
  REDIS_VERSION = full_redis.REDIS_VERSION, REDIS_VERSION_NUM = full_redis.REDIS_VERSION_NUM}
local load_redis = {}
real_setmetatable(load_redis, {
  __index = function(_, k)
    local v = rawget(load_redis_fields, k)
    if v == nil then missing(k) end
    return v
  end,
  __newindex = refuse,
  __metatable = sealed_meta(),
})
protected[load_redis] = true
local load_api = {redis = load_redis}

local fn_env = {}
real_setmetatable(fn_env, {
  __index = function(_, k)
    local v
    if hidden.loading then v = rawget(load_api, k) else v = rawget(G, k) end
    if v == nil then missing(k) end
    return v
  end,
  __newindex = refuse,
  __metatable = sealed_meta(),
})
protected[fn_env] = true

-- A function's run: Lua 5.1's xpcall passes no arguments, so this hands them over.
hidden.call_function = function()
  return hidden.fn(hidden.keys, hidden.argv)
end

return env, fn_env
