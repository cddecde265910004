function envoy_on_request(handle)
  local headers = handle:headers()
  headers:remove("@TENANT_HEADER@")
  headers:remove("@UNROUTED_HEADER@")
  headers:remove("@ORIGINAL_PATH_HEADER@")
  headers:remove("@ORIGINAL_METHOD_HEADER@")
  -- For the access log: the query's parameter names, never their values.
  local query = string.match(headers:get(":path") or "", "%?(.*)$")
  if query ~= nil and query ~= "" then
    local names = {}
    for pair in string.gmatch(query, "[^&]+") do
      local name = string.match(pair, "^[^=]*")
      if string.match(name, "^[%w_.%-]+$") == nil then
        name = "?"
      end
      names[#names + 1] = name
      if #names == 20 then
        names[#names + 1] = "..."
        break
      end
    end
    handle:streamInfo():dynamicMetadata():set("@LOG_NAMESPACE@", "query", table.concat(names, ","))
  end
  local length = headers:get("content-length")
  if length ~= nil then
    local size = tonumber(length)
    if size ~= nil and size > @MAX_BODY_BYTES@ then
      handle:respond({[":status"] = "413"}, "@TOO_LARGE_MESSAGE@")
      return
    end
  end
  local path = string.match(headers:get(":path") or "", "^[^?]*")
  if streams(headers:get(":method"), path) then
    handle:streamInfo():dynamicMetadata():set("knowledge.stream", "ndjson", true)
  end
  local problem = unknown_field(handle, headers:get(":method"), path)
  if problem ~= nil then
    -- For the local reply's ErrorInfo (knowledge_gateway.local_replies): its reason and field.
    local reply = handle:streamInfo():dynamicMetadata()
    reply:set("@REPLY_NAMESPACE@", "reason", problem.reason)
    reply:set("@REPLY_NAMESPACE@", "field", problem.field)
    handle:respond({[":status"] = "400"}, problem.message)
  end
end

function envoy_on_response(handle)
  local stream = handle:streamInfo():dynamicMetadata():get("knowledge.stream")
  if stream ~= nil and stream.ndjson and handle:headers():get(":status") == "200" then
    handle:headers():replace("content-type", "application/x-ndjson")
    return
  end
  local length = tonumber(handle:headers():get("content-length") or "")
  if handle:headers():get(":status") ~= "429" or length == nil or length > @MAX_ERROR_BODY_BYTES@ then
    return
  end
  local body = handle:body()
  if body == nil or not string.find(body:getBytes(0, body:length()), '"reason"%s*:%s*"@UPLOAD_TOO_LARGE@"') then
    return
  end
  body:setBytes([==[@TOO_LARGE_JSON@]==])
  handle:headers():replace(":status", "413")
end
