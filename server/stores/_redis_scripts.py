"""The Redis store's Lua scripts: each write is one script, which Redis runs alone.

Scripts return ``false`` (None in Python) for an unknown session, so the caller raises
``UnknownSession``; duplicates and missing records come back as small tables naming them.
Keys are passed in ``KEYS`` in the order each script's caller lists them in ``redis.py``.
"""

from __future__ import annotations

__all__ = ["SCRIPTS"]

_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'meta', ARGV[2], 'next_msg', 0, 'msg_total', 0, 'msg_tokens', 0)
redis.call('ZADD', KEYS[4], redis.call('INCR', KEYS[5]), ARGV[1])
local nr = tonumber(ARGV[3])
for i = 1, nr do redis.call('RPUSH', KEYS[6], ARGV[3 + i]) end
for i = 4 + nr, #ARGV, 2 do
  if redis.call('HSETNX', KEYS[3], ARGV[i], ARGV[i + 1]) == 1 then
    redis.call('RPUSH', KEYS[2], ARGV[i])
  end
end
return 1
"""
_ADD_ITEMS = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local added = {}
for i = 1, #ARGV, 2 do
  if redis.call('HSETNX', KEYS[3], ARGV[i], ARGV[i + 1]) == 1 then
    redis.call('RPUSH', KEYS[2], ARGV[i])
    redis.call('LREM', KEYS[4], 0, ARGV[i])
    added[#added + 1] = ARGV[i]
  end
end
return added
"""
_REMOVE_ITEM = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local was = redis.call('HDEL', KEYS[3], ARGV[1])
if was == 1 then redis.call('LREM', KEYS[2], 0, ARGV[1]) end
if not redis.call('LPOS', KEYS[4], ARGV[1]) then redis.call('RPUSH', KEYS[4], ARGV[1]) end
return was
"""
_APPEND = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local seq = redis.call('RPUSH', KEYS[2], ARGV[1]) - 1
if KEYS[3] then redis.call('HSETNX', KEYS[3], ARGV[2], seq) end
return seq
"""
_MESSAGES = """
local function clash(msgids, callids, batch)
  -- The first message id or tool call id of the batch the session already uses, or nil.
  for _, m in ipairs(batch) do
    if redis.call('HEXISTS', msgids, m[1]) == 1 then return {'message id', m[1]} end
    for _, c in ipairs(m[3]) do
      if redis.call('HEXISTS', callids, c) == 1 then return {'tool call id', c} end
    end
  end
  return nil
end
local function append_messages(h, msg, msgseq, msgids, callids, msgmeta, batch)
  local first = redis.call('HINCRBY', h, 'next_msg', #batch) - #batch
  local tokens = 0
  for k, m in ipairs(batch) do
    local seq = first + k - 1
    tokens = tokens + m[4]
    redis.call('HSET', msg, seq, m[2])
    redis.call('HSET', msgmeta, seq, cjson.encode({m[1], m[3], m[4]}))
    redis.call('ZADD', msgseq, seq, seq)
    redis.call('HSET', msgids, m[1], seq)
    for _, c in ipairs(m[3]) do redis.call('HSET', callids, c, seq) end
  end
  redis.call('HINCRBY', h, 'msg_total', #batch)
  redis.call('HINCRBY', h, 'msg_tokens', tokens)
  return first
end
"""
_APPEND_MESSAGES = (
    _MESSAGES
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local batch = cjson.decode(ARGV[1])
local taken = clash(KEYS[4], KEYS[5], batch)
if taken then return taken end
return append_messages(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], batch)
"""
)
_RECORD_CALL = (
    _MESSAGES
    + """
-- KEYS: h, calls, msg, msgseq, msgids, callids, msgmeta, parts, usage (store-wide), usage
-- (the session's). ARGV: call JSON or '', message batch, usage event or '', then the
-- history state's change: '' (none), 'set' or 'del', the value it was computed from ('' for
-- none) and the new value. A state changed meanwhile returns {'conflict'}: nothing is
-- written and the caller computes the change again.
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local batch = cjson.decode(ARGV[2])
local taken = clash(KEYS[5], KEYS[6], batch)
if taken then return taken end
if ARGV[4] ~= '' then
  if (redis.call('HGET', KEYS[8], 'history') or '') ~= ARGV[5] then return {'conflict'} end
  if ARGV[4] == 'set' then
    redis.call('HSET', KEYS[8], 'history', ARGV[6])
  else
    redis.call('HDEL', KEYS[8], 'history')
  end
end
local call, first, usage = -1, -1, -1
if ARGV[1] ~= '' then call = redis.call('RPUSH', KEYS[2], ARGV[1]) - 1 end
if #batch > 0 then
  first = append_messages(KEYS[1], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], batch)
end
if ARGV[3] ~= '' then
  usage = redis.call('RPUSH', KEYS[9], ARGV[3]) - 1
  redis.call('RPUSH', KEYS[10], usage)
end
return {'ok', call, first, usage}
"""
)
_FORGET = """
local function forget(seq)
  -- Only the small id record is decoded, never the message's payload; returns the
  -- message's tokens.
  local old = cjson.decode(redis.call('HGET', KEYS[6], seq))
  if redis.call('HGET', KEYS[4], old[1]) == tostring(seq) then
    redis.call('HDEL', KEYS[4], old[1])
  end
  for _, c in ipairs(old[2]) do
    if redis.call('HGET', KEYS[5], c) == tostring(seq) then redis.call('HDEL', KEYS[5], c) end
  end
  return old[3] or 0
end
"""
_REPLACE_MESSAGES = (
    _FORGET
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local batch = cjson.decode(ARGV[1])
for _, m in ipairs(batch) do
  if redis.call('HEXISTS', KEYS[2], m[4]) == 0 then return {'missing', m[4]} end
end
local tokens = 0
for _, m in ipairs(batch) do tokens = tokens - forget(m[4]) + m[5] end
redis.call('HINCRBY', KEYS[1], 'msg_tokens', tokens)
for _, m in ipairs(batch) do
  redis.call('HSET', KEYS[2], m[4], m[2])
  redis.call('HSET', KEYS[6], m[4], cjson.encode({m[1], m[3], m[5]}))
  redis.call('HSET', KEYS[4], m[1], m[4])
  for _, c in ipairs(m[3]) do redis.call('HSET', KEYS[5], c, m[4]) end
end
return {'ok'}
"""
)
_DELETE_MESSAGES = (
    _FORGET
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local seqs = redis.call('ZRANGEBYSCORE', KEYS[3], ARGV[1], ARGV[2])
local tokens = 0
for _, seq in ipairs(seqs) do
  tokens = tokens + forget(seq)
  redis.call('HDEL', KEYS[2], seq)
  redis.call('HDEL', KEYS[6], seq)
  redis.call('ZREM', KEYS[3], seq)
end
-- 0 - x, never -x: Lua prints -0 as "-0", which HINCRBY refuses
redis.call('HINCRBY', KEYS[1], 'msg_total', 0 - #seqs)
redis.call('HINCRBY', KEYS[1], 'msg_tokens', 0 - tokens)
return #seqs
"""
)
_READ_MESSAGES = """
local out = {}
for _, seq in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[2])) do
  out[#out + 1] = seq
  out[#out + 1] = redis.call('HGET', KEYS[2], seq)
end
return out
"""
_APPEND_USAGE = """
if KEYS[2] and redis.call('EXISTS', KEYS[2]) == 0 then return false end
local seq = redis.call('RPUSH', KEYS[1], ARGV[1]) - 1
if KEYS[3] then redis.call('RPUSH', KEYS[3], seq) end
return seq
"""
_READ_USAGE = """
local out = {}
for _, seq in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  out[#out + 1] = seq
  out[#out + 1] = redis.call('LINDEX', KEYS[2], seq)
end
return out
"""
_DELETE_USAGE = """
local n = 0
if ARGV[1] == 'session' then
  for _, seq in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
    local row = redis.call('LINDEX', KEYS[1], seq)
    if row and row ~= '' then
      redis.call('LSET', KEYS[1], seq, '')
      n = n + 1
    end
  end
else
  -- Emptied rows stay, so the next event's seq (its index) is still higher than any before.
  local rows = redis.call('LRANGE', KEYS[1], 0, -1)
  for _, row in ipairs(rows) do if row ~= '' then n = n + 1 end end
  redis.call('DEL', KEYS[1])
  local empty = {}
  for i = 1, math.min(#rows, 1000) do empty[i] = '' end
  for done = 0, #rows - 1, 1000 do
    redis.call('RPUSH', KEYS[1], unpack(empty, 1, math.min(1000, #rows - done)))
  end
end
for i = 2, #KEYS do redis.call('DEL', KEYS[i]) end
return n
"""
_PUT_EMBEDDINGS = """
for i = 1, #ARGV, 2 do redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1
"""


SCRIPTS: dict[str, str] = {
    "create": _CREATE,
    "add_items": _ADD_ITEMS,
    "remove_item": _REMOVE_ITEM,
    "append": _APPEND,
    "append_messages": _APPEND_MESSAGES,
    "record_call": _RECORD_CALL,
    "replace_messages": _REPLACE_MESSAGES,
    "delete_messages": _DELETE_MESSAGES,
    "read_messages": _READ_MESSAGES,
    "append_usage": _APPEND_USAGE,
    "read_usage": _READ_USAGE,
    "delete_usage": _DELETE_USAGE,
    "put_embeddings": _PUT_EMBEDDINGS,
}
