"""Trimming a stream without dropping what a consumer group has not read.

Result streams and the launch-failures stream are capped by count
(``APPORTION_STREAM_MAXLEN``) and by age (``APPORTION_STREAM_MAX_AGE``). The count cap
never removes an entry some consumer group has not been delivered yet: the stream is
trimmed to ``max(MAXLEN, the largest lag of its groups)`` entries (approximately, as
``MAXLEN ~`` does), so a subscriber that falls behind, or a group created before a
burst, still gets every entry; once every group has caught up the stream shrinks back
to ``MAXLEN``. A group whose lag Redis cannot tell (``lag`` null: entries deleted by
``XDEL`` in its range) holds the count trim back altogether.

The age cap is the last resort and applies to everyone: an abandoned group would
otherwise keep a stream growing for ever. What it removes before a group read it is
counted per group in the hash :meth:`~apportion.workers.redis.keys.Keys.trimmed_unread`
(field: the group, value: entries lost; it expires ``APPORTION_STREAM_MAX_AGE`` after
the last loss), which ``apportion health`` reports as a failure naming the group and
``apportion metrics`` exports as ``apportion_stream_trimmed_unread``.

:data:`TRIM_LUA` defines a Lua function ``trim(stream, maxlen, minid, counter, ttl)``
that the publishing scripts call after their ``XADD`` (it is pasted into each script:
Redis scripts cannot share functions otherwise).
"""

from __future__ import annotations

TRIM_LUA = """
local function group_lags(stream)
  local lags, known = {}, true
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    local name, lag
    for i = 1, #g, 2 do
      if g[i] == 'name' then name = g[i + 1] elseif g[i] == 'lag' then lag = g[i + 1] end
    end
    if lag then lags[name] = lag else known = false end
  end
  return lags, known
end

local function trim(stream, maxlen, minid, counter, ttl)
  local lags, known = group_lags(stream)
  if known then
    local keep = tonumber(maxlen)
    for _, lag in pairs(lags) do
      if lag > keep then keep = lag end
    end
    redis.call('XTRIM', stream, 'MAXLEN', '~', keep)
  end
  if redis.call('XTRIM', stream, 'MINID', '~', minid) > 0 and next(lags) then
    local after = group_lags(stream)
    for name, lag in pairs(lags) do
      local now = after[name] or 0
      if lag > now then
        redis.call('HINCRBY', counter, name, lag - now)
        redis.call('EXPIRE', counter, ttl)
      end
    end
  end
end
"""


def trimmed_ttl(max_age_seconds: int) -> int:
    """How long the count of entries lost unread is kept after the last loss: the age
    cap, and at least a minute, so that a health check after a loss still sees it."""
    return max(int(max_age_seconds), 60)
