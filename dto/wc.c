// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * ib_wc to DTO event. No locking: pure functions.
 *
 * Status mapping (IB_WC_* to DAT DTO status; its table with the DAT
 * meanings is in Documentation/kevd/api.rst, which kevd_dto_status_map
 * tests against):
 *
 *   IB_WC_SUCCESS            SUCCESS
 *   IB_WC_WR_FLUSH_ERR       ERR_FLUSHED
 *   IB_WC_LOC_LEN_ERR        ERR_LOCAL_LENGTH
 *   IB_WC_LOC_QP_OP_ERR      ERR_LOCAL_EP
 *   IB_WC_LOC_EEC_OP_ERR     ERR_LOCAL_EP
 *   IB_WC_LOC_PROT_ERR       ERR_LOCAL_PROTECTION
 *   IB_WC_MW_BIND_ERR        ERR_RMR_OPERATION_FAILED
 *   IB_WC_BAD_RESP_ERR       ERR_BAD_RESPONSE
 *   IB_WC_LOC_ACCESS_ERR     ERR_LOCAL_PROTECTION
 *   IB_WC_REM_INV_REQ_ERR    ERR_REMOTE_RESPONDER
 *   IB_WC_REM_ACCESS_ERR     ERR_REMOTE_ACCESS
 *   IB_WC_REM_OP_ERR         ERR_REMOTE_RESPONDER
 *   IB_WC_RETRY_EXC_ERR      ERR_TRANSPORT
 *   IB_WC_RNR_RETRY_EXC_ERR  ERR_RECEIVER_NOT_READY
 *   IB_WC_LOC_RDD_VIOL_ERR   ERR_LOCAL_PROTECTION
 *   IB_WC_REM_INV_RD_REQ_ERR ERR_REMOTE_RESPONDER
 *   IB_WC_REM_ABORT_ERR      ERR_PARTIAL_PACKET
 *   IB_WC_INV_EECN_ERR       ERR_TRANSPORT
 *   IB_WC_INV_EEC_STATE_ERR  ERR_TRANSPORT
 *   IB_WC_FATAL_ERR          ERR_TRANSPORT
 *   IB_WC_RESP_TIMEOUT_ERR   ERR_TRANSPORT
 *   IB_WC_GENERAL_ERR        ERR_LOCAL_MM_ERROR (the catch-all)
 *   anything else            ERR_LOCAL_MM_ERROR (the catch-all)
 */
#include "kevd_internal.h"

static const u8 kevd_status_map[] = {
	[IB_WC_SUCCESS]			= KEVD_DTO_SUCCESS,
	[IB_WC_LOC_LEN_ERR]		= KEVD_DTO_ERR_LOCAL_LENGTH,
	[IB_WC_LOC_QP_OP_ERR]		= KEVD_DTO_ERR_LOCAL_EP,
	[IB_WC_LOC_EEC_OP_ERR]		= KEVD_DTO_ERR_LOCAL_EP,
	[IB_WC_LOC_PROT_ERR]		= KEVD_DTO_ERR_LOCAL_PROTECTION,
	[IB_WC_WR_FLUSH_ERR]		= KEVD_DTO_ERR_FLUSHED,
	[IB_WC_MW_BIND_ERR]		= KEVD_DTO_ERR_RMR_OPERATION_FAILED,
	[IB_WC_BAD_RESP_ERR]		= KEVD_DTO_ERR_BAD_RESPONSE,
	[IB_WC_LOC_ACCESS_ERR]		= KEVD_DTO_ERR_LOCAL_PROTECTION,
	[IB_WC_REM_INV_REQ_ERR]		= KEVD_DTO_ERR_REMOTE_RESPONDER,
	[IB_WC_REM_ACCESS_ERR]		= KEVD_DTO_ERR_REMOTE_ACCESS,
	[IB_WC_REM_OP_ERR]		= KEVD_DTO_ERR_REMOTE_RESPONDER,
	[IB_WC_RETRY_EXC_ERR]		= KEVD_DTO_ERR_TRANSPORT,
	[IB_WC_RNR_RETRY_EXC_ERR]	= KEVD_DTO_ERR_RECEIVER_NOT_READY,
	[IB_WC_LOC_RDD_VIOL_ERR]	= KEVD_DTO_ERR_LOCAL_PROTECTION,
	[IB_WC_REM_INV_RD_REQ_ERR]	= KEVD_DTO_ERR_REMOTE_RESPONDER,
	[IB_WC_REM_ABORT_ERR]		= KEVD_DTO_ERR_PARTIAL_PACKET,
	[IB_WC_INV_EECN_ERR]		= KEVD_DTO_ERR_TRANSPORT,
	[IB_WC_INV_EEC_STATE_ERR]	= KEVD_DTO_ERR_TRANSPORT,
	[IB_WC_FATAL_ERR]		= KEVD_DTO_ERR_TRANSPORT,
	[IB_WC_RESP_TIMEOUT_ERR]	= KEVD_DTO_ERR_TRANSPORT,
	[IB_WC_GENERAL_ERR]		= KEVD_DTO_ERR_LOCAL_MM_ERROR,
};

/**
 * kevd_wc_status() - the DAT DTO status of an ib_wc status.
 * @status: the provider's status (an &enum ib_wc_status value).
 *
 * Context: any.
 * Return: an &enum kevd_dto_status; KEVD_DTO_ERR_LOCAL_MM_ERROR for a
 * status kevd does not know.
 */
u32 kevd_wc_status(int status)
{
	if ((unsigned int)status >= ARRAY_SIZE(kevd_status_map))
		return KEVD_DTO_ERR_LOCAL_MM_ERROR;
	return kevd_status_map[status];
}
EXPORT_SYMBOL_GPL(kevd_wc_status);

/**
 * kevd_wc_opcode() - the DAT DTO operation of a work completion.
 * @wc: the work completion.
 *
 * Context: any.
 * Return: an &enum kevd_dto_op; KEVD_DTO_UNKNOWN for an opcode kevd does
 * not know, and for a failed completion, whose opcode the verbs leave
 * undefined (only wr_id, status, qp and vendor_err are).
 */
u32 kevd_wc_opcode(const struct ib_wc *wc)
{
	if (wc->status != IB_WC_SUCCESS)
		return KEVD_DTO_UNKNOWN;
	switch (wc->opcode) {
	case IB_WC_SEND:
		return KEVD_DTO_SEND;
	case IB_WC_RDMA_WRITE:
		return (wc->wc_flags & IB_WC_WITH_IMM) ?
		       KEVD_DTO_RDMA_WRITE_IMMED : KEVD_DTO_RDMA_WRITE;
	case IB_WC_RDMA_READ:
		return KEVD_DTO_RDMA_READ;
	case IB_WC_COMP_SWAP:
	case IB_WC_MASKED_COMP_SWAP:
		return KEVD_DTO_CMP_AND_SWAP;
	case IB_WC_FETCH_ADD:
	case IB_WC_MASKED_FETCH_ADD:
		return KEVD_DTO_FETCH_AND_ADD;
	case IB_WC_BIND_MW:
		return KEVD_DTO_BIND_MW;
	case IB_WC_LOCAL_INV:
		return KEVD_DTO_LMR_INVALIDATE;
	case IB_WC_REG_MR:
		return KEVD_DTO_LMR_FMR;
	case IB_WC_RECV:
		return (wc->wc_flags & IB_WC_WITH_INVALIDATE) ?
		       KEVD_DTO_RECEIVE_WITH_INVALIDATE : KEVD_DTO_RECEIVE;
	case IB_WC_RECV_RDMA_WITH_IMM:
		return KEVD_DTO_RECEIVE_IMMED;
	default:
		return KEVD_DTO_UNKNOWN;
	}
}
EXPORT_SYMBOL_GPL(kevd_wc_opcode);

/*
 * Does the verbs define byte_len for this successful completion? Only for
 * receives, RDMA READ and atomics (the 8 bytes returned): providers leave
 * it stale for the rest (mlx5 writes nothing for SEND, RDMA WRITE, REG_MR
 * and LOCAL_INV).
 */
static bool kevd_wc_has_len(const struct ib_wc *wc)
{
	switch (wc->opcode) {
	case IB_WC_RDMA_READ:
	case IB_WC_COMP_SWAP:
	case IB_WC_FETCH_ADD:
	case IB_WC_MASKED_COMP_SWAP:
	case IB_WC_MASKED_FETCH_ADD:
		return true;
	default:
		return wc->opcode & IB_WC_RECV;
	}
}

/*
 * Immediate data is a receive's: a sender's completion may set
 * IB_WC_WITH_IMM (mlx5 does for SEND and RDMA WRITE with immediate) but
 * leaves imm_data stale.
 */
static bool kevd_wc_has_imm(const struct ib_wc *wc)
{
	return (wc->opcode & IB_WC_RECV) && (wc->wc_flags & IB_WC_WITH_IMM);
}

/**
 * kevd_wc_to_event() - convert a work completion into a DTO event.
 * @wc: the work completion.
 * @ev: the event to fill.
 *
 * Only what the verbs define reaches the event: the length of successful
 * receives, RDMA READs and atomics, a receive's immediate data with
 * IB_WC_WITH_IMM (a sender's completion has none); the
 * operation and length of a failed completion are undefined (only wr_id,
 * status, qp and vendor_err are). Everything else is KEVD_DTO_UNKNOWN or
 * 0, never a stale field of an earlier completion. For consumers that
 * poll a CQ of their own and want kevd's events (->evd is left alone).
 *
 * Context: any.
 */
void kevd_wc_to_event(const struct ib_wc *wc, struct kevd_event *ev)
{
	struct kevd_dto_event *dto = &ev->dto;
	bool ok = wc->status == IB_WC_SUCCESS;

	ev->event_number = KEVD_DTO_COMPLETION_EVENT;
	dto->ep_context = wc->qp ? wc->qp->qp_context : NULL;
	dto->cookie = wc->wr_id;
	dto->status = kevd_wc_status(wc->status);
	dto->transferred_length = ok && kevd_wc_has_len(wc) ? wc->byte_len : 0;
	dto->operation = kevd_wc_opcode(wc);
	dto->has_imm = ok && kevd_wc_has_imm(wc);
	dto->reserved = 0;
	dto->imm_data = dto->has_imm ? be32_to_cpu(wc->ex.imm_data) : 0;
	dto->vendor_err = ok ? 0 : wc->vendor_err;
}
EXPORT_SYMBOL_GPL(kevd_wc_to_event);
