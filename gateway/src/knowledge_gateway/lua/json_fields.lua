local schemas = {}
local lists = {}  -- lists[a message's table][field] = true: a repeated field, sent as a JSON array
local number_maps = {}  -- number_maps[a message's table][field] = true: a map whose values are numbers
local json_routes = {}
local stream_routes = {}  -- {method, path pattern}: the calls whose 200 is one JSON object per line
@SCHEMAS@

local function skip_space(s, i)
  return string.find(s, "[^ \t\r\n]", i) or (#s + 1)
end

local function string_end(s, i)  -- s[i] is the opening quote: the index after the closing one
  local j = i + 1
  while true do
    local k = string.find(s, '["\\]', j)
    if k == nil then error("syntax", 0) end
    if string.byte(s, k) == 92 then j = k + 2 else return k + 1 end
  end
end

local function field_name(path, key)
  if #key > 64 or string.match(key, "^[%w_]+$") == nil then
    return path .. "?"
  end
  return path .. key
end

local check_value
local function check_object(s, i, schema, path, depth)
  i = skip_space(s, i + 1)
  if string.byte(s, i) == 125 then return i + 1 end
  while true do
    if string.byte(s, i) ~= 34 then error("syntax", 0) end
    local after = string_end(s, i)
    local key = string.sub(s, i + 1, after - 2)
    local inner = true
    if schema ~= nil then
      inner = schema[key]
      if inner == nil then error({field = field_name(path, key)}, 0) end
    end
    local colon = skip_space(s, after)
    if string.byte(s, colon) ~= 58 then error("syntax", 0) end
    local start = skip_space(s, colon + 1)
    -- The transcoder would read a lone value as a one-item list: the contract says an array.
    if schema ~= nil and lists[schema] ~= nil and lists[schema][key] and string.byte(s, start) ~= 91
        and string.sub(s, start, start + 3) ~= "null" then
      error({field = field_name(path, key), list = true}, 0)
    end
    -- The transcoder turned a map's non-number value into corrupt wire bytes (a 500 at the
    -- service): every value of a map of numbers must be a number.
    if schema ~= nil and number_maps[schema] ~= nil and number_maps[schema][key]
        and string.byte(s, start) == 123 then
      local k = skip_space(s, start + 1)
      while string.byte(s, k) ~= 125 do
        if string.byte(s, k) ~= 34 then error("syntax", 0) end
        k = skip_space(s, string_end(s, k))
        if string.byte(s, k) ~= 58 then error("syntax", 0) end
        k = skip_space(s, k + 1)
        if string.find(s, "^-?%d", k) == nil then
          error({field = field_name(path, key), number = true}, 0)
        end
        k = skip_space(s, check_value(s, k, nil, path, depth + 1))
        if string.byte(s, k) == 44 then k = skip_space(s, k + 1)
        elseif string.byte(s, k) ~= 125 then error("syntax", 0) end
      end
    end
    local j = check_value(s, start, schema ~= nil and inner or nil, path .. key .. ".", depth)
    j = skip_space(s, j)
    local c = string.byte(s, j)
    if c == 44 then
      i = skip_space(s, j + 1)
    elseif c == 125 then
      return j + 1
    else
      error("syntax", 0)
    end
  end
end

check_value = function(s, i, schema, path, depth)
  if depth > 32 then error("syntax", 0) end
  local c = string.byte(s, i)
  if c == 123 then
    return check_object(s, i, type(schema) == "table" and schema or nil, path, depth + 1)
  elseif c == 91 then
    i = skip_space(s, i + 1)
    if string.byte(s, i) == 93 then return i + 1 end
    while true do
      i = skip_space(s, check_value(s, i, schema, path, depth + 1))
      local d = string.byte(s, i)
      if d == 44 then
        i = skip_space(s, i + 1)
      elseif d == 93 then
        return i + 1
      else
        error("syntax", 0)
      end
    end
  elseif c == 34 then
    return string_end(s, i)
  elseif schema ~= nil and string.sub(s, i, i + 3) == "null" then
    error({field = string.sub(path, 1, -2), null = true}, 0)
  end
  local j = string.find(s, "[,%]} \t\r\n]", i)
  if j == nil then return #s + 1 end
  if j == i then error("syntax", 0) end
  return j
end

-- nil when the body is fine (or not JSON: the transcoder answers that), else the 400's reason
-- (the catalogue's, as a service names it), field and message.
local function unknown_field(handle, method, path)
  local schema, needs_body = nil, false
  for _, route in ipairs(json_routes) do
    if route[1] == method and string.match(path, route[2]) then
      schema, needs_body = route[3], route[4]
      break
    end
  end
  if schema == nil then return nil end
  local body = handle:body()
  if body == nil or body:length() == 0 then
    if needs_body then
      return {reason = "INVALID_REQUEST", field = "body",
              message = "this call needs a JSON body: an absent one would clear the access list"}
    end
    return nil
  end
  local s = body:getBytes(0, body:length())
  local ok, problem = pcall(check_value, s, skip_space(s, 1), schema, "", 0)
  if ok or type(problem) ~= "table" then return nil end
  if problem.list then
    return {reason = "INVALID_REQUEST", field = problem.field,
            message = "field " .. problem.field .. " is a list: send a JSON array"}
  end
  if problem.number then
    return {reason = "INVALID_REQUEST", field = problem.field,
            message = "field " .. problem.field .. " maps keys to numbers: every value must be a number"}
  end
  if problem.null then
    return {reason = "INVALID_REQUEST", field = problem.field,
            message = "field " .. problem.field .. " is null: leave it out instead"}
  end
  return {reason = "UNKNOWN_FIELD", field = problem.field,
          message = "unknown field " .. problem.field .. " in the request body"}
end

local function streams(method, path)
  for _, route in ipairs(stream_routes) do
    if route[1] == method and string.match(path, route[2]) then return true end
  end
  return false
end
