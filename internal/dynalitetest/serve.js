'use strict'
// Runs dynalite in memory on 127.0.0.1:<port> for internal/dynalitetest:
//
//   node serve.js <dynalite package directory> <port>
//
// Tables are ACTIVE as soon as they are created (DynamoDB takes seconds;
// the tests wait for ACTIVE either way). dynalite 4.0.0 lacks two things
// the stores use, which this script adds:
//
// - UpdateTimeToLive, which creating the stores' table calls: answered
//   here, and DescribeTimeToLive with what it set. The specification is
//   recorded; items are never expired (nor are they by moto; DynamoDB
//   deletes expired items within days, and readers filter them).
// - ReturnValuesOnConditionCheckFailure on PutItem, UpdateItem and
//   DeleteItem (below).
//
// Every other request goes to dynalite unchanged.
const path = require('path')

const [dir, port] = process.argv.slice(2)
if (!dir || !port) {
  console.error('usage: node serve.js <dynalite package directory> <port>')
  process.exit(2)
}

// dynalite's server keeps its store to itself: catch it as it is made,
// to find tables the way dynalite's own DescribeTimeToLive does.
const db = require(path.join(dir, 'db'))
const create = db.create
let store
db.create = function (...args) {
  store = create.apply(this, args)
  return store
}
// ReturnValuesOnConditionCheckFailure (DynamoDB's since 2023, dynalite's
// issue 182): dynalite drops the parameter. With ALL_OLD, a write whose
// condition fails returns the item it found in the exception, as
// DynamoDB does.
for (const op of [ 'putItem', 'updateItem', 'deleteItem' ]) {
  require(path.join(dir, 'validations', op)).types.ReturnValuesOnConditionCheckFailure = {
    type: 'String',
    enum: [ 'ALL_OLD', 'NONE' ],
  }
}
const checkConditional = db.checkConditional
db.checkConditional = function (data, existing) {
  const err = checkConditional.apply(this, arguments)
  if (err && err.body && existing && data.ReturnValuesOnConditionCheckFailure == 'ALL_OLD') {
    err.body = Object.assign({}, err.body, { Item: existing })
  }
  return err
}
const dynalite = require(dir)
const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 })
const [handle] = server.listeners('request')
server.removeAllListeners('request')

const ttl = new Map() // table name -> { AttributeName, Enabled }

function send (res, status, body) {
  const text = JSON.stringify(body)
  res.statusCode = status
  res.setHeader('Content-Type', 'application/x-amz-json-1.0')
  res.setHeader('Content-Length', Buffer.byteLength(text))
  res.end(text)
}

function invalid (res, message) {
  send(res, 400, { __type: 'com.amazon.coral.validate#ValidationException', message })
}

function timeToLive (op, req, res) {
  let body = ''
  req.setEncoding('utf8')
  req.on('data', chunk => { body += chunk })
  req.on('end', () => {
    let data
    try {
      data = JSON.parse(body)
    }
    catch {
      return send(res, 400, { __type: 'com.amazon.coral.service#SerializationException' })
    }
    const name = data && data.TableName
    if (typeof name != 'string' || !/^[a-zA-Z0-9_.-]{3,255}$/.test(name)) {
      return invalid(res, 'TableName: a name of 3 to 255 characters [a-zA-Z0-9_.-] is required')
    }
    const spec = data.TimeToLiveSpecification
    if (op == 'UpdateTimeToLive') {
      if (!spec || typeof spec.AttributeName != 'string' || spec.AttributeName.length < 1 ||
          spec.AttributeName.length > 255 || typeof spec.Enabled != 'boolean') {
        return invalid(res, 'TimeToLiveSpecification: AttributeName (1 to 255 characters) and Enabled are required')
      }
    }
    store.getTable(name, false, err => {
      if (err) {
        if (err.statusCode) return send(res, err.statusCode, err.body)
        return send(res, 500, { __type: 'com.amazonaws.dynamodb.v20120810#InternalServerError', message: String(err) })
      }
      const cur = ttl.get(name)
      if (op == 'DescribeTimeToLive') {
        const desc = cur && cur.Enabled ?
          { TimeToLiveStatus: 'ENABLED', AttributeName: cur.AttributeName } :
          { TimeToLiveStatus: 'DISABLED' }
        return send(res, 200, { TimeToLiveDescription: desc })
      }
      if (spec.Enabled && cur && cur.Enabled) return invalid(res, 'TimeToLive is already enabled')
      if (!spec.Enabled && !(cur && cur.Enabled)) return invalid(res, 'TimeToLive is already disabled')
      ttl.set(name, { AttributeName: spec.AttributeName, Enabled: spec.Enabled })
      send(res, 200, { TimeToLiveSpecification: { AttributeName: spec.AttributeName, Enabled: spec.Enabled } })
    })
  })
}

server.on('request', (req, res) => {
  const target = String(req.headers['x-amz-target'] || '')
  const [api, op] = target.split('.')
  if (req.method == 'POST' && api == 'DynamoDB_20120810' && (op == 'UpdateTimeToLive' || op == 'DescribeTimeToLive')) {
    return timeToLive(op, req, res)
  }
  handle(req, res)
})

server.listen(Number(port), '127.0.0.1', () => {
  console.log('dynalite listening at http://127.0.0.1:' + port)
})
